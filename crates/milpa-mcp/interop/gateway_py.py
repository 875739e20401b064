"""Gateway interop: the official Python SDK (`mcp` 2.x) as a client of `milpa proxy` in front
of two third-party MCP servers from npm, @modelcontextprotocol/server-everything (the proxied
command, prefix `everything__`) and @modelcontextprotocol/server-filesystem (an `[[upstreams]]`
entry of the manifest, prefix `fs__`, whose `write_*` tools need a person's approval), plus
the project's own fixture server over Streamable HTTP (an `[[upstreams]]` url, prefix `own__`).

    python gateway_py.py MILPA DIR NODE EVERYTHING_JS

DIR holds `gate.toml` (the manifest), `root/` (the filesystem server's only folder, with
`hello.txt`), and gets `store.db` (the store shared with `milpa approvals grant`) and
`audit.jsonl` (the proxy's audit records).
"""

import base64
import json
import os
import re
import subprocess
import sys
import traceback

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

MILPA, DIR, NODE, EVERYTHING_JS = sys.argv[1:5]
ROOT = os.path.join(DIR, "root")
AUDIT = os.path.join(DIR, "audit.jsonl")
GLOBAL = ["--manifest", os.path.join(DIR, "gate.toml"), "--store", "sqlite:" + os.path.join(DIR, "store.db")]


def decide_at_terminal(argv, approval):
    """Runs `milpa approvals grant|reject ID` as a person does: with a pseudo-terminal as
    standard input, typing the approval's code (the `code` of `approvals show ID --json`)."""
    shown = subprocess.run(
        [MILPA, *GLOBAL, "approvals", "show", approval, "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    code = json.loads(shown.stdout)["code"]
    master, slave = os.openpty()
    try:
        # The terminal keeps the line until milpa reads it.
        os.write(master, (code + "\n").encode())
        return subprocess.run(argv, stdin=slave, capture_output=True, text=True, timeout=60)
    finally:
        os.close(slave)
        os.close(master)
results = {"passed": 0, "failed": 0}
calls = {}  # tool -> number of calls made, each of which must leave one audit record


def server():
    return StdioServerParameters(
        command=MILPA,
        args=GLOBAL
        + ["proxy", "--name", "everything", "--prefix", "everything__", "--audit", AUDIT, "--", NODE, EVERYTHING_JS, "stdio"],
    )


def check(cond, message):
    if not cond:
        raise AssertionError(message)


async def run(name, body):
    try:
        await body()
        results["passed"] += 1
        print(f"ok - py gateway {name}", flush=True)
    except Exception:  # noqa: BLE001 - report every failure
        results["failed"] += 1
        print(f"not ok - py gateway {name}: {traceback.format_exc()}", flush=True)


def texts(result):
    return [c.text for c in result.content if c.type == "text"]


def milpa_meta(result):
    return (result.meta or {}).get("milpa", {})


def read(path):
    with open(path) as f:
        return f.read()


def tiny_image():
    """The PNG server-everything sends, read from its own source."""
    source = read(os.path.join(os.path.dirname(EVERYTHING_JS), "tools", "get-tiny-image.js"))
    return re.search(r'MCP_TINY_IMAGE = "([^"]+)"', source).group(1)


async def main():
    async with Client(server()) as client:

        async def call(tool, args):
            calls[tool] = calls.get(tool, 0) + 1
            return await client.call_tool(tool, args)

        async def listing():
            # Upstreams start in the background while milpa serves: their tools are listed
            # once each is up (an `npx` first start can take a while).
            expected = ("everything__echo", "everything__get-tiny-image", "fs__read_text_file", "fs__write_file", "own__add")
            names = set()
            with anyio.move_on_after(120):
                while not all(n in names for n in expected):
                    # "refresh": the SDK would otherwise answer from its cache of the first
                    # listing for as long as the server's ttlMs allows.
                    names = {t.name for t in (await client.list_tools(cache_mode="refresh")).tools}
                    await anyio.sleep(0.2)
            for n in expected:
                check(n in names, f"missing {n} in {sorted(names)}")
            check("echo" not in names and "write_file" not in names, "unprefixed names listed")

        async def echo():
            r = await call("everything__echo", {"message": "through the gateway"})
            check(not r.is_error, r)
            check(texts(r) == ["Echo: through the gateway"], texts(r))

        async def image():
            r = await call("everything__get-tiny-image", {})
            check(not r.is_error, r)
            check([c.type for c in r.content] == ["text", "image", "text"], r.content)
            block = r.content[1]
            check(block.mime_type == "image/png", block.mime_type)
            check(block.data == tiny_image(), "image data changed on the way")
            check(base64.b64decode(block.data).startswith(b"\x89PNG\r\n\x1a\n"), "not a PNG")

        async def upstream_error():
            r = await call("fs__read_text_file", {"path": "/etc/hostname"})
            check(r.is_error, r)
            check(any("Access denied" in t for t in texts(r)), texts(r))

        async def own_over_http():
            r = await call("own__add", {"a": 2, "b": 3})
            check(not r.is_error, r)
            check(texts(r) == ["5"], texts(r))
            check(r.structured_content == {"result": 5}, r.structured_content)
            failed = await call("own__test_error_handling", {})
            check(failed.is_error, failed)
            check(texts(failed) == ["This tool intentionally returns an error for testing"], texts(failed))

        async def fs_read():
            r = await call("fs__read_text_file", {"path": os.path.join(ROOT, "hello.txt")})
            check(not r.is_error, r)
            check(texts(r) == [read(os.path.join(ROOT, "hello.txt"))], texts(r))

        async def parked_write():
            target = os.path.join(ROOT, "approved.txt")
            args = {"path": target, "content": "written after approval"}
            first = await call("fs__write_file", args)
            check(first.is_error, first)
            check(milpa_meta(first).get("code") == "APPROVAL_PENDING", first.meta)
            approval = ((first.meta or {}).get("milpa_data") or {}).get("approval_id")
            check(isinstance(approval, str), first.structured_content)
            check(not os.path.exists(target), "written before approval")
            waiting = await call("fs__write_file", {"confirm_token": approval})
            check(milpa_meta(waiting).get("code") == "APPROVAL_PENDING", waiting.meta)
            check(not os.path.exists(target), "written before approval")
            granted = decide_at_terminal(
                [MILPA, *GLOBAL, "approvals", "grant", approval, "--actor", "interop-reviewer"],
                approval,
            )
            check(granted.returncode == 0, f"grant: {granted.stdout} {granted.stderr}")
            replay = await call("fs__write_file", {"confirm_token": approval})
            check(not replay.is_error, replay)
            check(read(target) == "written after approval", read(target))
            # Runs once: a second replay is refused and writes nothing.
            with open(target, "w") as f:
                f.write("sentinel")
            again = await call("fs__write_file", {"confirm_token": approval})
            check(again.is_error, again)
            check(read(target) == "sentinel", "the approved write ran twice")

        async def cedar_forbid():
            secret = os.path.join(ROOT, "secret.txt")
            r = await call("fs__read_text_file", {"path": secret})
            check(r.is_error, r)
            check(milpa_meta(r).get("code") == "FORBIDDEN", r.meta)
            message = " ".join(texts(r))
            check("'no-secret-files'" in message and "fs__read_text_file" in message, message)
            check("vault" not in message, "the secret file's content came back")
            await audit_record("fs__read_text_file", "denied", "no-secret-files")

        async def rate_limited():
            # 30 tokens an hour per caller and tool; echo costs 1 and was called once already.
            n = calls.get("everything__echo", 0)
            r = None
            while n < 40:
                n += 1
                r = await call("everything__echo", {"message": f"call {n}"})
                if milpa_meta(r).get("code") == "RATE_LIMITED":
                    break
                check(not r.is_error, r)
            check(milpa_meta(r).get("code") == "RATE_LIMITED", r.meta)
            check(n == 31, f"the budget of 30 ran out at call {n}")
            await audit_record("everything__echo", "rate_limited", None)

        async def audit_record(tool, outcome, needle):
            for _ in range(100):  # up to 5 s, for a loaded machine
                for record in audit_records():
                    if record.get("tool") == tool and record.get("outcome") == outcome:
                        if needle is None or needle in json.dumps(record):
                            return
                await anyio.sleep(0.05)
            raise AssertionError(f"no {outcome} audit record for {tool} naming {needle}")

        def audit_records():
            records = []
            with open(AUDIT) as f:
                for line in f:
                    try:
                        records.append(json.loads(line))
                    except ValueError:
                        pass  # a line still being written; the next look sees it whole
            return records

        async def audited():
            counts = {}
            for _ in range(100):  # up to 5 s, for a loaded machine
                counts = {}
                for record in audit_records():
                    counts[record.get("tool")] = counts.get(record.get("tool"), 0) + 1
                if all(counts.get(tool, 0) >= n for tool, n in calls.items()):
                    break
                await anyio.sleep(0.05)
            check(calls and counts == calls, f"audit records per tool {counts}, calls {calls}")

        await run("tools/list has the prefixed tools of the three servers", listing)
        await run("everything__echo", echo)
        await run("everything__get-tiny-image arrives intact", image)
        await run("upstream error arrives as isError with its text", upstream_error)
        await run("our own fixture over HTTP: own__add and an error", own_over_http)
        await run("fs__read_text_file", fs_read)
        await run("fs__write_file parked until granted, then written once", parked_write)
        await run("a Cedar forbid on the path argument denies, naming the policy", cedar_forbid)
        await run("an over-budget caller is rate limited", rate_limited)
        await run("one audit record per call", audited)
    print(f"{results['passed']} passed, {results['failed']} failed", flush=True)


anyio.run(main)
sys.exit(0 if results["failed"] == 0 else 1)
