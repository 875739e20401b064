"""Interop test: the official Python SDK (`mcp` 2.x) as a client of the milpa-mcp fixture
server ("everything" example), over stdio or Streamable HTTP.

    python py_client.py --stdio PATH_TO_EVERYTHING AUDIT_FILE
    python py_client.py --http URL AUDIT_FILE

The 2.x client probes `server/discover` first and falls back to `initialize` when the server
answers -32601; milpa answers it, so every check runs on the 2026-07-28 revision (stateless,
confirmation through input_required). AUDIT_FILE is where the server writes
its audit records; the cancellation test reads it.
"""

import json
import sys
import time
import traceback

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.stdio import StdioServerParameters

MODE, TARGET, AUDIT = sys.argv[1:4]
KIND = MODE.removeprefix("--")
results = {"passed": 0, "failed": 0}


def server():
    if MODE == "--stdio":
        return StdioServerParameters(command=TARGET, args=["--stdio", "--audit", AUDIT])
    return TARGET


def check(cond, message):
    if not cond:
        raise AssertionError(message)


async def run(name, body):
    try:
        await body()
        results["passed"] += 1
        print(f"ok - py {KIND} {name}", flush=True)
    except Exception:  # noqa: BLE001 - report every failure
        results["failed"] += 1
        print(f"not ok - py {KIND} {name}: {traceback.format_exc()}", flush=True)


def text_of(result):
    return result.content[0].text


def milpa_meta(result):
    meta = result.meta or {}
    return meta.get("milpa", {})


async def plain_tests():
    async with Client(server()) as client:

        async def discovery():
            # The default mode probes server/discover first: the stateless revision.
            version = client.session.protocol_version
            check(version == "2026-07-28", f"negotiated {version}")

        async def listing():
            tools = (await client.list_tools()).tools
            names = {t.name for t in tools}
            for n in ("add", "echo", "delete_note", "slow", "test_simple_text"):
                check(n in names, f"missing {n}")

        async def add():
            r = await client.call_tool("add", {"a": 2, "b": 3})
            check(not r.is_error, "is_error")
            check(text_of(r) == "5", text_of(r))
            check(r.structured_content == {"result": 5}, r.structured_content)

        async def refused():
            r = await client.call_tool("restart_server", {})
            check(r.is_error, "is_error")
            check(milpa_meta(r).get("code") == "FORBIDDEN", r.meta)
            missing = await client.call_tool("no_such_tool", {})
            check(milpa_meta(missing).get("code") == "TOOL_NOT_FOUND", missing.meta)

        async def confirm_by_token():
            first = await client.call_tool("delete_note", {"id": 7})
            token = (first.structured_content or {}).get("confirm_token")
            check(isinstance(token, str), first)
            second = await client.call_tool("delete_note", {"confirm_token": token})
            check(not second.is_error, second)
            check(second.structured_content.get("deleted") == 7, second.structured_content)

        async def progress():
            seen = []

            async def on_progress(progress, total, message):
                seen.append(progress)

            r = await client.call_tool("slow", {"seconds": 0.3}, progress_callback=on_progress)
            check(not r.is_error, r)
            check(len(seen) >= 2, f"progress count {len(seen)}")
            check(seen == sorted(seen), seen)

        def audit_records():
            # A line still being written is skipped; the next look sees it whole.
            records = []
            with open(AUDIT) as f:
                for line in f:
                    try:
                        records.append(json.loads(line))
                    except ValueError:
                        pass
            return records

        async def cancellation():
            started = time.monotonic()
            try:
                await client.call_tool("slow", {"seconds": 20}, read_timeout_seconds=0.3)
                raise AssertionError("the call should time out")
            except AssertionError:
                raise
            except Exception:  # noqa: BLE001 - the timeout error type differs by transport
                pass
            r = await client.call_tool("echo", {"text": "still here"})
            check(text_of(r) == "still here", "server still serves")
            audited = False
            for _ in range(100):  # up to 5 s, for a loaded machine
                audited = any(
                    r.get("tool") == "slow" and r.get("outcome") == "cancelled"
                    for r in audit_records()
                )
                if audited:
                    break
                await anyio.sleep(0.05)
            check(audited, "audit record with outcome cancelled")
            check(time.monotonic() - started < 10, "cancelled quickly")

        async def resources():
            listed = (await client.list_resources()).resources
            uris = {str(r.uri) for r in listed}
            check("test://static-text" in uris, f"resources {uris}")
            templates = (await client.list_resource_templates()).resource_templates
            check(
                any(t.uri_template == "test://template/{id}/data" for t in templates),
                f"templates {templates}",
            )
            read = await client.read_resource("test://template/7/data")
            check('"id":"7"' in read.contents[0].text, f"read {read}")
            audited = False
            for _ in range(100):  # the fixture's audit file is written in batches
                audited = any(
                    r.get("kind") == "read_resource" and r.get("tool") == "test://template/7/data"
                    for r in audit_records()
                )
                if audited:
                    break
                await anyio.sleep(0.05)
            check(audited, "audit record of kind read_resource")

        async def prompts():
            listed = {p.name for p in (await client.list_prompts()).prompts}
            check("test_prompt_with_arguments" in listed, f"prompts {listed}")
            got = await client.get_prompt("test_prompt_with_arguments", {"arg1": "a", "arg2": "b"})
            text = got.messages[0].content.text
            check(text == "Prompt with arguments: arg1='a', arg2='b'", text)
            ref = types.PromptReference(type="ref/prompt", name="test_prompt_with_arguments")
            done = await client.complete(ref, {"name": "arg1", "value": "te"})
            check(done.completion.values == ["test", "testing", "tested"], done)

        await run("discovery negotiates 2026-07-28", discovery)
        await run("resources: list, templates, read (audited)", resources)
        await run("prompts: list, get, complete", prompts)
        await run("tools/list", listing)
        await run("tools/call add", add)
        await run("refused call", refused)
        await run("confirmation by token", confirm_by_token)
        await run("progress", progress)
        await run("cancellation", cancellation)


async def elicitation_tests():
    asked = {}

    async def accept(context, params):
        asked["message"] = params.message
        return types.ElicitResult(action="accept", content={"confirm": True})

    async def confirm_accept():
        async with Client(server(), elicitation_callback=accept) as client:
            r = await client.call_tool("delete_note", {"id": 9})
        check("delete_note(id=9)" in asked.get("message", ""), asked)
        check(not r.is_error, r)
        check(r.structured_content.get("deleted") == 9, r.structured_content)

    async def decline(context, params):
        return types.ElicitResult(action="decline")

    async def confirm_decline():
        async with Client(server(), elicitation_callback=decline) as client:
            r = await client.call_tool("delete_note", {"id": 10})
        check(r.is_error, r)
        check(milpa_meta(r).get("code") == "CONFIRMATION_DECLINED", r.meta)

    await run("confirmation by elicitation: accept", confirm_accept)
    await run("confirmation by elicitation: decline", confirm_decline)


async def main():
    await plain_tests()
    await elicitation_tests()
    print(f"{results['passed']} passed, {results['failed']} failed", flush=True)


anyio.run(main)
sys.exit(0 if results["failed"] == 0 else 1)
