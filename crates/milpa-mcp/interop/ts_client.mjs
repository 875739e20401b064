// Interop test: the official TypeScript SDK (@modelcontextprotocol/sdk) as a client of the
// milpa-mcp fixture server ("everything" example), over stdio or Streamable HTTP.
//
//   node ts_client.mjs --stdio PATH_TO_EVERYTHING AUDIT_FILE
//   node ts_client.mjs --http URL AUDIT_FILE
//
// AUDIT_FILE is where the server writes its audit records (JSON lines); the cancellation
// test reads it to check that the cancelled call was audited as cancelled.

import { readFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CallToolResultSchema, ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const [mode, target, auditFile] = process.argv.slice(2);
if (!mode || !target || !auditFile) {
  console.error("usage: ts_client.mjs --stdio BIN AUDIT | --http URL AUDIT");
  process.exit(2);
}

function transport() {
  if (mode === "--stdio") {
    return new StdioClientTransport({ command: target, args: ["--stdio", "--audit", auditFile], stderr: "inherit" });
  }
  return new StreamableHTTPClientTransport(new URL(target));
}

async function connect(capabilities = {}, onElicit) {
  const client = new Client({ name: "milpa-interop-ts", version: "1.0.0" }, { capabilities });
  if (onElicit) client.setRequestHandler(ElicitRequestSchema, onElicit);
  await client.connect(transport());
  return client;
}

function assert(cond, message) {
  if (!cond) throw new Error(message);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
let passed = 0;
let failed = 0;

async function test(name, body) {
  try {
    await body();
    passed++;
    console.log(`ok - ts ${mode.slice(2)} ${name}`);
  } catch (error) {
    failed++;
    console.log(`not ok - ts ${mode.slice(2)} ${name}: ${error?.stack ?? error}`);
  }
}

const plain = await connect();

await test("initialize negotiates a version", async () => {
  const version = plain.getServerVersion();
  assert(version?.name === "milpa-everything", `server name ${JSON.stringify(version)}`);
  assert(plain.getServerCapabilities()?.tools, "tools capability");
});

await test("tools/list", async () => {
  const { tools } = await plain.listTools();
  const names = tools.map((t) => t.name);
  for (const n of ["add", "echo", "delete_note", "slow", "test_simple_text"]) assert(names.includes(n), `missing ${n}`);
  const del = tools.find((t) => t.name === "delete_note");
  assert(del.annotations?.destructiveHint === true, "destructiveHint");
});

await test("resources: list, templates, read, subscribe", async () => {
  const { resources } = await plain.listResources();
  assert(resources.some((r) => r.uri === "test://static-text"), `resources ${JSON.stringify(resources)}`);
  const { resourceTemplates } = await plain.listResourceTemplates();
  assert(resourceTemplates[0]?.uriTemplate === "test://template/{id}/data", "template");
  const read = await plain.readResource({ uri: "test://static-binary" });
  assert(read.contents[0].mimeType === "image/png" && read.contents[0].blob, "blob");
  await plain.subscribeResource({ uri: "test://watched-resource" });
  await plain.unsubscribeResource({ uri: "test://watched-resource" });
  let refused = null;
  try {
    await plain.readResource({ uri: "test://nope" });
  } catch (error) {
    refused = error;
  }
  assert(refused && String(refused.message).includes("Resource not found: test://nope"), `refusal ${refused}`);
});

await test("prompts: list, get with an image, complete", async () => {
  const { prompts } = await plain.listPrompts();
  assert(prompts.some((p) => p.name === "test_prompt_with_image"), "listed");
  const got = await plain.getPrompt({ name: "test_prompt_with_image" });
  assert(got.messages[0].content.type === "image" && got.messages[0].content.mimeType === "image/png", "image");
  const done = await plain.complete({
    ref: { type: "ref/prompt", name: "test_prompt_with_arguments" },
    argument: { name: "arg2", value: "va" },
  });
  assert(JSON.stringify(done.completion.values) === '["value","valid"]', JSON.stringify(done));
});

await test("tools/call add", async () => {
  const r = await plain.callTool({ name: "add", arguments: { a: 2, b: 3 } });
  assert(r.isError === false, "isError");
  assert(r.content[0].text === "5", `text ${r.content[0].text}`);
  assert(r.structuredContent?.result === 5, "structuredContent.result");
  assert(r._meta?.milpa?.tool === "add", "_meta.milpa");
});

await test("refused call is an isError result with a code", async () => {
  const r = await plain.callTool({ name: "restart_server", arguments: {} });
  assert(r.isError === true, "isError");
  assert(r._meta?.milpa?.code === "FORBIDDEN", `code ${r._meta?.milpa?.code}`);
  assert(r.content[0].text === "Restarts are not for agents.", r.content[0].text);
  const missing = await plain.callTool({ name: "no_such_tool", arguments: {} });
  assert(missing._meta?.milpa?.code === "TOOL_NOT_FOUND", "TOOL_NOT_FOUND");
});

await test("confirmation by token (client without elicitation)", async () => {
  const first = await plain.callTool({ name: "delete_note", arguments: { id: 7 } });
  assert(first.isError === false, "first isError");
  const token = first.structuredContent?.confirm_token;
  assert(typeof token === "string", "confirm_token");
  assert(first.content[0].text.includes("confirm_token"), first.content[0].text);
  const second = await plain.callTool({ name: "delete_note", arguments: { confirm_token: token } });
  assert(second.isError === false, "replay isError");
  assert(second.structuredContent?.deleted === 7, JSON.stringify(second));
  const again = await plain.callTool({ name: "delete_note", arguments: { confirm_token: token } });
  assert(again.isError === true, "a token works once");
});

await test("progress notifications", async () => {
  const seen = [];
  const r = await plain.callTool({ name: "slow", arguments: { seconds: 0.3 } }, CallToolResultSchema, {
    onprogress: (p) => seen.push(p),
  });
  assert(r.isError === false, "isError");
  assert(seen.length >= 2, `progress count ${seen.length}`);
  assert(seen[0].progress < seen[seen.length - 1].progress, "increasing");
});

await test("cancellation", async () => {
  const controller = new AbortController();
  const started = Date.now();
  const call = plain.callTool({ name: "slow", arguments: { seconds: 20 } }, CallToolResultSchema, {
    signal: controller.signal,
  });
  await sleep(300);
  controller.abort("test cancels");
  let rejected = false;
  try {
    await call;
  } catch {
    rejected = true;
  }
  assert(rejected, "the aborted call rejects");
  // The server keeps serving, and audits the call as cancelled.
  const r = await plain.callTool({ name: "echo", arguments: { text: "still here" } });
  assert(r.content[0].text === "still here", "server still serves");
  let audited = false;
  for (let i = 0; i < 100 && !audited; i++) { // up to 5 s, for a loaded machine
    // A line still being written is skipped; the next look sees it whole.
    const lines = readFileSync(auditFile, "utf8").split("\n").flatMap((l) => {
      try {
        return [JSON.parse(l)];
      } catch {
        return [];
      }
    });
    audited = lines.some((l) => l.tool === "slow" && l.outcome === "cancelled");
    if (!audited) await sleep(50);
  }
  assert(audited, "audit record with outcome cancelled");
  assert(Date.now() - started < 10000, "cancelled quickly");
});

await plain.close();

await test("confirmation by elicitation: accept runs the call", async () => {
  let asked = null;
  const client = await connect({ elicitation: {} }, async (request) => {
    asked = request.params;
    return { action: "accept", content: { confirm: true } };
  });
  const r = await client.callTool({ name: "delete_note", arguments: { id: 9 } });
  await client.close();
  assert(asked?.message?.includes("delete_note(id=9)"), `message ${asked?.message}`);
  assert(r.isError === false, JSON.stringify(r));
  assert(r.structuredContent?.deleted === 9, JSON.stringify(r.structuredContent));
});

await test("confirmation by elicitation: decline blocks", async () => {
  const client = await connect({ elicitation: {} }, async () => ({ action: "decline" }));
  const r = await client.callTool({ name: "delete_note", arguments: { id: 10 } });
  await client.close();
  assert(r.isError === true, "isError");
  assert(r._meta?.milpa?.code === "CONFIRMATION_DECLINED", JSON.stringify(r._meta));
  assert(r.content[0].text.includes("declined"), r.content[0].text);
});

console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
