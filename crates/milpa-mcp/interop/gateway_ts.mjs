// Gateway interop: the official TypeScript SDK (@modelcontextprotocol/sdk) as a client of
// `milpa proxy` in front of two third-party MCP servers from npm:
// @modelcontextprotocol/server-everything (the proxied command, prefix `everything__`) and
// @modelcontextprotocol/server-filesystem (an `[[upstreams]]` entry of the manifest, prefix
// `fs__`, whose `write_*` tools need a person's approval), plus the project's own fixture
// server over Streamable HTTP (an `[[upstreams]]` url, prefix `own__`).
//
//   node gateway_ts.mjs MILPA DIR NODE EVERYTHING_JS
//
// DIR holds `gate.toml` (the manifest), `root/` (the filesystem server's only folder, with
// `hello.txt`), and gets `store.db` (the store shared with `milpa approvals grant`) and
// `audit.jsonl` (the proxy's audit records).

import { spawnSync } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [milpa, dir, node, everythingJs] = process.argv.slice(2);
if (!milpa || !dir || !node || !everythingJs) {
  console.error("usage: gateway_ts.mjs MILPA DIR NODE EVERYTHING_JS");
  process.exit(2);
}
const root = join(dir, "root");
const auditFile = join(dir, "audit.jsonl");
const global = ["--manifest", join(dir, "gate.toml"), "--store", `sqlite:${join(dir, "store.db")}`];

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
    console.log(`ok - ts gateway ${name}`);
  } catch (error) {
    failed++;
    console.log(`not ok - ts gateway ${name}: ${error?.stack ?? error}`);
  }
}

const client = new Client({ name: "milpa-gateway-interop-ts", version: "1.0.0" }, { capabilities: {} });
await client.connect(
  new StdioClientTransport({
    command: milpa,
    args: [...global, "proxy", "--name", "everything", "--prefix", "everything__", "--audit", auditFile, "--", node, everythingJs, "stdio"],
    stderr: "inherit",
  }),
);

// tool -> number of calls made, each of which must leave one audit record
const calls = {};
async function call(name, args) {
  calls[name] = (calls[name] ?? 0) + 1;
  return client.callTool({ name, arguments: args });
}
const texts = (r) => r.content.filter((c) => c.type === "text").map((c) => c.text);
const milpaMeta = (r) => r._meta?.milpa ?? {};

// Runs `milpa approvals grant|reject ID` as a person does: at a terminal (`script` from
// util-linux gives it one; Node has no pseudo-terminals of its own), typing the approval's
// code (the `code` of `approvals show ID --json`).
function decideAtTerminal(argv, approval) {
  const shown = spawnSync(milpa, [...global, "approvals", "show", approval, "--json"], {
    encoding: "utf8",
    timeout: 60000,
  });
  const code = JSON.parse(shown.stdout).code;
  const quote = (arg) => `'${arg.replaceAll("'", "'\\''")}'`;
  return spawnSync("script", ["-qec", argv.map(quote).join(" "), "/dev/null"], {
    encoding: "utf8",
    input: `${code}\n`,
    timeout: 60000,
  });
}
const read = (path) => readFileSync(path, "utf8");

await test("tools/list has the prefixed tools of the three servers", async () => {
  // Upstreams start in the background while milpa serves: their tools are listed once each
  // is up (an `npx` first start can take a while).
  const expected = ["everything__echo", "everything__get-tiny-image", "fs__read_text_file", "fs__write_file", "own__add"];
  const deadline = Date.now() + 120000;
  let names = new Set();
  while (Date.now() < deadline) {
    names = new Set((await client.listTools()).tools.map((t) => t.name));
    if (expected.every((n) => names.has(n))) break;
    await sleep(200);
  }
  for (const n of expected) {
    assert(names.has(n), `missing ${n} in ${[...names].join(", ")}`);
  }
  assert(!names.has("echo") && !names.has("write_file"), "unprefixed names listed");
});

await test("everything__echo", async () => {
  const r = await call("everything__echo", { message: "through the gateway" });
  assert(!r.isError, JSON.stringify(r));
  assert(JSON.stringify(texts(r)) === JSON.stringify(["Echo: through the gateway"]), JSON.stringify(r));
});

await test("everything__get-tiny-image arrives intact", async () => {
  const r = await call("everything__get-tiny-image", {});
  assert(!r.isError, JSON.stringify(r));
  assert(r.content.map((c) => c.type).join() === "text,image,text", JSON.stringify(r.content));
  const block = r.content[1];
  assert(block.mimeType === "image/png", block.mimeType);
  // The PNG server-everything sends, read from its own source.
  const source = read(join(dirname(everythingJs), "tools", "get-tiny-image.js"));
  const sent = source.match(/MCP_TINY_IMAGE = "([^"]+)"/)[1];
  assert(block.data === sent, "image data changed on the way");
  assert(Buffer.from(block.data, "base64").subarray(0, 4).toString("latin1") === "\x89PNG", "not a PNG");
});

await test("upstream error arrives as isError with its text", async () => {
  const r = await call("fs__read_text_file", { path: "/etc/hostname" });
  assert(r.isError === true, JSON.stringify(r));
  assert(texts(r).some((t) => t.includes("Access denied")), JSON.stringify(r));
});

await test("our own fixture over HTTP: own__add and an error", async () => {
  const r = await call("own__add", { a: 2, b: 3 });
  assert(!r.isError, JSON.stringify(r));
  assert(JSON.stringify(texts(r)) === JSON.stringify(["5"]), JSON.stringify(r));
  assert(JSON.stringify(r.structuredContent) === JSON.stringify({ result: 5 }), JSON.stringify(r));
  const failed = await call("own__test_error_handling", {});
  assert(failed.isError === true, JSON.stringify(failed));
  assert(
    JSON.stringify(texts(failed)) === JSON.stringify(["This tool intentionally returns an error for testing"]),
    JSON.stringify(failed),
  );
});

await test("fs__read_text_file", async () => {
  const r = await call("fs__read_text_file", { path: join(root, "hello.txt") });
  assert(!r.isError, JSON.stringify(r));
  assert(JSON.stringify(texts(r)) === JSON.stringify([read(join(root, "hello.txt"))]), JSON.stringify(r));
});

await test("fs__write_file parked until granted, then written once", async () => {
  const target = join(root, "approved.txt");
  const first = await call("fs__write_file", { path: target, content: "written after approval" });
  assert(first.isError === true, JSON.stringify(first));
  assert(milpaMeta(first).code === "APPROVAL_PENDING", JSON.stringify(first._meta));
  // A refusal's data stays out of structuredContent for a tool with an output schema
  // (clients check it against that schema): it is in _meta.milpa_data.
  const approval = first._meta?.milpa_data?.approval_id;
  assert(typeof approval === "string", JSON.stringify(first));
  assert(!existsSync(target), "written before approval");
  const waiting = await call("fs__write_file", { confirm_token: approval });
  assert(milpaMeta(waiting).code === "APPROVAL_PENDING", JSON.stringify(waiting._meta));
  assert(!existsSync(target), "written before approval");
  const granted = decideAtTerminal([milpa, ...global, "approvals", "grant", approval, "--actor", "interop-reviewer"], approval);
  assert(granted.status === 0, `grant: ${granted.stdout} ${granted.stderr}`);
  const replay = await call("fs__write_file", { confirm_token: approval });
  assert(!replay.isError, JSON.stringify(replay));
  assert(read(target) === "written after approval", read(target));
  // Runs once: a second replay is refused and writes nothing.
  writeFileSync(target, "sentinel");
  const again = await call("fs__write_file", { confirm_token: approval });
  assert(again.isError === true, JSON.stringify(again));
  assert(read(target) === "sentinel", "the approved write ran twice");
});

function auditRecords() {
  const records = [];
  for (const line of read(auditFile).split("\n")) {
    try {
      records.push(JSON.parse(line));
    } catch {
      // an empty line, or one still being written: the next look sees it whole
    }
  }
  return records;
}

async function auditRecord(tool, outcome, needle) {
  for (let i = 0; i < 100; i++) { // up to 5 s, for a loaded machine
    const found = auditRecords().some(
      (r) => r.tool === tool && r.outcome === outcome && (needle === null || JSON.stringify(r).includes(needle)),
    );
    if (found) return;
    await sleep(50);
  }
  throw new Error(`no ${outcome} audit record for ${tool} naming ${needle}`);
}

await test("a Cedar forbid on the path argument denies, naming the policy", async () => {
  const r = await call("fs__read_text_file", { path: join(root, "secret.txt") });
  assert(r.isError === true, JSON.stringify(r));
  assert(milpaMeta(r).code === "FORBIDDEN", JSON.stringify(r._meta));
  const message = texts(r).join(" ");
  assert(message.includes("'no-secret-files'") && message.includes("fs__read_text_file"), message);
  assert(!message.includes("vault"), "the secret file's content came back");
  await auditRecord("fs__read_text_file", "denied", "no-secret-files");
});

await test("an over-budget caller is rate limited", async () => {
  // 30 tokens an hour per caller and tool; echo costs 1 and was called once already.
  let n = calls["everything__echo"] ?? 0;
  let r;
  while (n < 40) {
    n++;
    r = await call("everything__echo", { message: `call ${n}` });
    if (milpaMeta(r).code === "RATE_LIMITED") break;
    assert(!r.isError, JSON.stringify(r));
  }
  assert(milpaMeta(r).code === "RATE_LIMITED", JSON.stringify(r._meta));
  assert(n === 31, `the budget of 30 ran out at call ${n}`);
  await auditRecord("everything__echo", "rate_limited", null);
});

await test("one audit record per call", async () => {
  let counts = {};
  for (let i = 0; i < 100; i++) { // up to 5 s, for a loaded machine
    counts = {};
    for (const line of read(auditFile).split("\n")) {
      try {
        const record = JSON.parse(line);
        counts[record.tool] = (counts[record.tool] ?? 0) + 1;
      } catch {
        // an empty line, or one still being written: the next look sees it whole
      }
    }
    if (Object.entries(calls).every(([tool, n]) => (counts[tool] ?? 0) >= n)) break;
    await sleep(50);
  }
  const tools = Object.keys(calls).sort();
  const same = JSON.stringify(Object.keys(counts).sort()) === JSON.stringify(tools) && tools.every((t) => counts[t] === calls[t]);
  assert(tools.length > 0 && same, `audit records per tool ${JSON.stringify(counts)}, calls ${JSON.stringify(calls)}`);
});

await client.close();
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
