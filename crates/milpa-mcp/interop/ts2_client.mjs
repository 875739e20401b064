// Interop test: the TypeScript SDK 2.x client (@modelcontextprotocol/client) as a client of
// the milpa-mcp fixture server over stdio or Streamable HTTP, negotiating the 2026-07-28
// revision (`versionNegotiation: { mode: "auto" }` probes `server/discover` first; the
// 1.x SDK, `@modelcontextprotocol/sdk` 1.32, only speaks up to 2025-11-25).
//
//   node ts2_client.mjs --stdio PATH_TO_EVERYTHING AUDIT_FILE
//   node ts2_client.mjs --http URL AUDIT_FILE

import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";

const [mode, target, auditFile] = process.argv.slice(2);
if (!mode || !target || !auditFile) {
  console.error("usage: ts2_client.mjs --stdio BIN AUDIT | --http URL AUDIT");
  process.exit(2);
}

function transport() {
  if (mode === "--stdio") {
    return new StdioClientTransport({ command: target, args: ["--stdio", "--audit", auditFile], stderr: "inherit" });
  }
  return new StreamableHTTPClientTransport(new URL(target));
}

async function connect(capabilities = {}, onElicit) {
  const client = new Client(
    { name: "milpa-interop-ts2", version: "1.0.0" },
    { capabilities, versionNegotiation: { mode: "auto" } },
  );
  if (onElicit) client.setRequestHandler("elicitation/create", onElicit);
  await client.connect(transport());
  return client;
}

function assert(cond, message) {
  if (!cond) throw new Error(message);
}

let passed = 0;
let failed = 0;

async function test(name, body) {
  try {
    await body();
    passed++;
    console.log(`ok - ts2 ${mode.slice(2)} ${name}`);
  } catch (error) {
    failed++;
    console.log(`not ok - ts2 ${mode.slice(2)} ${name}: ${error?.stack ?? error}`);
  }
}

const plain = await connect();

await test("discovery negotiates 2026-07-28", async () => {
  const version = plain.getNegotiatedProtocolVersion();
  assert(version === "2026-07-28", `negotiated ${version}`);
});

await test("tools/list", async () => {
  const { tools } = await plain.listTools();
  assert(tools.some((t) => t.name === "add"), "add is listed");
});

await test("tools/call add", async () => {
  const result = await plain.callTool({ name: "add", arguments: { a: 2, b: 3 } });
  assert(result.structuredContent?.result === 5, JSON.stringify(result));
});

await test("progress on the call's own stream", async () => {
  const seen = [];
  const result = await plain.callTool(
    { name: "test_tool_with_progress", arguments: {} },
    { onprogress: (p) => seen.push(p.progress) },
  );
  assert(!result.isError, JSON.stringify(result));
  assert(seen.length >= 2, `progress ${JSON.stringify(seen)}`);
});

const asked = [];
// Answers what the form asks: a confirmation, a name, an age.
const answers = { confirm: true, name: "Ada", age: 36 };
const confirming = await connect({ elicitation: {} }, async (request) => {
  asked.push(request.params);
  const fields = Object.keys(request.params.requestedSchema?.properties ?? {});
  return { action: "accept", content: Object.fromEntries(fields.map((f) => [f, answers[f]])) };
});
await test("confirmation through input_required: accept", async () => {
  const result = await confirming.callTool({ name: "delete_note", arguments: { id: 7 } });
  assert(result.structuredContent?.deleted === 7, JSON.stringify(result));
  assert(asked.length === 1 && asked[0].requestedSchema?.properties?.confirm, JSON.stringify(asked));
  asked.length = 0;
});

const declining = await connect({ elicitation: {} }, async () => ({ action: "decline" }));
await test("confirmation through input_required: decline", async () => {
  const result = await declining.callTool({ name: "delete_note", arguments: { id: 8 } });
  assert(result.isError === true, JSON.stringify(result));
});

await test("a tool's own elicitation through input_required", async () => {
  const result = await confirming.callTool({ name: "test_input_required_result_multi_round", arguments: {} });
  assert(result.content?.[0]?.text === "Ada is 36 years old", JSON.stringify(result));
});

for (const client of [plain, confirming, declining]) await client.close();
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
