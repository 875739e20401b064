#!/usr/bin/env bash
# milpa-mcp: the official MCP conformance suite against the fixture server over HTTP (0.1.16
# for 2024-11-05..2025-11-25, and the 0.2.0 pre-release line at --spec-version 2026-07-28),
# interop tests with the official Python and TypeScript SDKs as clients (stdio and HTTP), and
# the same clients through `milpa proxy` in front of third-party servers from npm
# (@modelcontextprotocol/server-everything and server-filesystem), and the conformance suite
# again through the gateway in front of the fixture (`milpa proxy` over stdio, an
# `[[upstreams]] url` entry over HTTP).
#
#   crates/milpa-mcp/interop/run.sh [all|conformance|conformance-2026|python|node|gateway]   (default: all)
#
# Installs what is missing into .cache/milpa-mcp (idempotent; nothing is fetched when the
# pinned versions are already there), builds the `everything` example, starts it on a free
# loopback port, runs the checks, and exits non-zero on any failure.
# Needs: cargo, npm (any Node; Node 22 itself comes from the npm registry), python3 (venv).
set -euo pipefail

WHAT=${1:-all}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
CACHE="$ROOT/.cache/milpa-mcp"
NODE_DIR="$CACHE/node"
PY_DIR="$CACHE/py"
WORK="$CACHE/run"
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}

NODE_VERSION=22.23.5
CONFORMANCE_VERSION=0.1.16
# The pre-release line with the 2026-07-28 scenarios, installed beside 0.1.16 (its own prefix).
CONFORMANCE_NEXT_VERSION=0.2.0-alpha.12
NEXT_DIR="$CACHE/conformance-next"
TS_SDK_VERSION=1.32.2
# The 2.x client package: the first TypeScript client that speaks 2026-07-28 (opt-in
# `versionNegotiation`); the 1.x SDK above stops at 2025-11-25.
TS_CLIENT2_VERSION=2.4.0
CLIENT2_DIR="$CACHE/ts-client2"
PY_MCP_VERSION=2.3.0
SERVERS_DIR="$CACHE/servers"
EVERYTHING_VERSION=2026.8.31
FILESYSTEM_VERSION=2026.8.31

CONFORMANCE_SCENARIOS=(
  server-initialize ping tools-list logging-set-level
  server-sse-multiple-streams server-sse-polling dns-rebinding-protection
  tools-call-simple-text tools-call-image tools-call-audio tools-call-embedded-resource
  tools-call-mixed-content tools-call-with-logging tools-call-error tools-call-with-progress
  tools-call-sampling tools-call-elicitation
  json-schema-2020-12 elicitation-sep1034-defaults elicitation-sep1330-enums
  resources-list resources-read-text resources-read-binary resources-templates-read
  resources-subscribe resources-unsubscribe
  prompts-list prompts-get-simple prompts-get-with-args prompts-get-embedded-resource
  prompts-get-with-image completion-complete
)

# Every 2026-07-28 server scenario of the pre-release line.
CONFORMANCE_2026_SCENARIOS=(
  server-stateless tools-list
  tools-call-simple-text tools-call-image tools-call-audio tools-call-embedded-resource
  tools-call-mixed-content tools-call-error tools-call-with-progress
  json-schema-2020-12 server-sse-multiple-streams dns-rebinding-protection caching
  http-header-validation http-custom-header-server-validation
  input-required-result-basic-elicitation input-required-result-basic-sampling
  input-required-result-basic-list-roots input-required-result-request-state
  input-required-result-multiple-input-requests input-required-result-multi-round
  input-required-result-missing-input-response
  input-required-result-result-type input-required-result-unsupported-methods
  input-required-result-tampered-state input-required-result-capability-check
  input-required-result-ignore-extra-params input-required-result-validate-input
  resources-list resources-read-text resources-read-binary resources-templates-read
  sep-2164-resource-not-found
  prompts-list prompts-get-simple prompts-get-with-args prompts-get-embedded-resource
  prompts-get-with-image completion-complete input-required-result-non-tool-request
)

log() { echo "[milpa-mcp interop] $*" >&2; }

case "$(uname -m)" in
  x86_64 | amd64) NODE_ARCH=x64 ;;
  aarch64 | arm64) NODE_ARCH=arm64 ;;
  *) log "unsupported architecture $(uname -m)"; exit 2 ;;
esac
NODE_PKG="node-linux-$NODE_ARCH"
NODE="$NODE_DIR/node_modules/$NODE_PKG/bin/node"

install_node() {
  local stamp="$NODE_DIR/.stamp" want="$NODE_PKG@$NODE_VERSION conformance@$CONFORMANCE_VERSION sdk@$TS_SDK_VERSION"
  if [[ -x "$NODE" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then return; fi
  command -v npm > /dev/null || { log "npm is needed to install Node $NODE_VERSION and the test clients"; exit 2; }
  log "installing Node $NODE_VERSION, @modelcontextprotocol/conformance@$CONFORMANCE_VERSION, @modelcontextprotocol/sdk@$TS_SDK_VERSION"
  mkdir -p "$NODE_DIR"
  npm install --prefix "$NODE_DIR" --no-audit --no-fund --loglevel=error \
    "$NODE_PKG@$NODE_VERSION" \
    "@modelcontextprotocol/conformance@$CONFORMANCE_VERSION" \
    "@modelcontextprotocol/sdk@$TS_SDK_VERSION" >&2
  echo "$want" > "$stamp"
}

install_conformance_next() {
  install_node
  local stamp="$NEXT_DIR/.stamp" want="conformance@$CONFORMANCE_NEXT_VERSION"
  if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then return; fi
  log "installing @modelcontextprotocol/conformance@$CONFORMANCE_NEXT_VERSION"
  mkdir -p "$NEXT_DIR"
  npm install --prefix "$NEXT_DIR" --no-audit --no-fund --loglevel=error \
    "@modelcontextprotocol/conformance@$CONFORMANCE_NEXT_VERSION" >&2
  echo "$want" > "$stamp"
}

install_ts_client2() {
  install_node
  local stamp="$CLIENT2_DIR/.stamp" want="client@$TS_CLIENT2_VERSION"
  if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then return; fi
  log "installing @modelcontextprotocol/client@$TS_CLIENT2_VERSION"
  mkdir -p "$CLIENT2_DIR"
  npm install --prefix "$CLIENT2_DIR" --no-audit --no-fund --loglevel=error \
    "@modelcontextprotocol/client@$TS_CLIENT2_VERSION" >&2
  echo "$want" > "$stamp"
}

install_python() {
  local stamp="$PY_DIR/.stamp" want="mcp==$PY_MCP_VERSION"
  if [[ -x "$PY_DIR/bin/python" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then return; fi
  log "installing the Python SDK ($want)"
  rm -rf "$PY_DIR"
  python3 -m venv "$PY_DIR"
  "$PY_DIR/bin/pip" install --quiet --disable-pip-version-check "$want" >&2
  echo "$want" > "$stamp"
}

# The third-party servers the gateway checks put behind `milpa proxy` (run with our Node 22).
install_servers() {
  local stamp="$SERVERS_DIR/.stamp" want="everything@$EVERYTHING_VERSION filesystem@$FILESYSTEM_VERSION"
  if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then return; fi
  log "installing @modelcontextprotocol/server-everything@$EVERYTHING_VERSION, server-filesystem@$FILESYSTEM_VERSION"
  mkdir -p "$SERVERS_DIR"
  npm install --prefix "$SERVERS_DIR" --no-audit --no-fund --loglevel=error \
    "@modelcontextprotocol/server-everything@$EVERYTHING_VERSION" \
    "@modelcontextprotocol/server-filesystem@$FILESYSTEM_VERSION" >&2
  echo "$want" > "$stamp"
}

build() {
  log "building the everything example"
  (cd "$ROOT" && cargo build --quiet -p milpa-mcp --example everything)
  BIN="$TARGET_DIR/debug/examples/everything"
  [[ -x "$BIN" ]] || { log "no binary at $BIN"; exit 2; }
}

SERVER_PID=""
stop_server() {
  if [[ -n "$SERVER_PID" ]]; then
    kill "$SERVER_PID" 2> /dev/null || true
    wait "$SERVER_PID" 2> /dev/null || true
    SERVER_PID=""
  fi
}
trap 'stop_server; stop_gateway' EXIT

# start_server AUDIT_FILE [extra args...]: starts the fixture on a free loopback port; sets URL.
start_server() {
  local audit=$1
  shift
  local errlog="$WORK/server-$RANDOM.log"
  : > "$audit"
  : > "$errlog"
  "$BIN" --http 127.0.0.1:0 --audit "$audit" "$@" 2> "$errlog" &
  SERVER_PID=$!
  URL=$(await_url "server" "$SERVER_PID" "$errlog" 'listening on')
}

# await_url WHAT PID ERRLOG PHRASE: the http:// URL that follows PHRASE in ERRLOG, once the
# process PID has written it (10 s at most); exits the run, showing the log, when PID dies or
# says nothing in time.
await_url() {
  local what=$1 pid=$2 errlog=$3 phrase=$4 url=""
  for _ in $(seq 1 100); do
    url=$(sed -n "s/.*$phrase \(http:[^ ]*\).*/\1/p" "$errlog" | head -n1)
    [[ -n "$url" ]] && { echo "$url"; return; }
    kill -0 "$pid" 2> /dev/null || { cat "$errlog" >&2; log "$what died"; exit 1; }
    sleep 0.1
  done
  cat "$errlog" >&2
  log "$what did not start"
  exit 1
}

FAILED=0
PASSED=0

# conformance_scenarios LABEL URL: every scenario of CONFORMANCE_SCENARIOS against URL, one
# line each ("ok - conformance LABEL scenario"), counted.
conformance_scenarios() {
  local label=$1 url=$2 out
  for scenario in "${CONFORMANCE_SCENARIOS[@]}"; do
    out="$WORK/conformance-$label$scenario.txt"
    if (cd "$WORK" && timeout 120 "$NODE" "$NODE_DIR/node_modules/.bin/conformance" server \
      --url "$url" --scenario "$scenario" -o "$WORK/results" > "$out" 2>&1) \
      && grep -Eq "^Passed: [0-9]+/[0-9]+, 0 failed, 0 warnings" "$out"; then
      PASSED=$((PASSED + 1))
      echo "ok - conformance $label$scenario ($(grep -E '^Passed:' "$out"))"
    else
      FAILED=$((FAILED + 1))
      echo "not ok - conformance $label$scenario"
      sed 's/^/    /' "$out"
    fi
  done
}

run_conformance() {
  install_node
  start_server "$WORK/conformance-audit.jsonl"
  log "conformance suite against $URL"
  conformance_scenarios "" "$URL"
  stop_server
}

GATEWAY_PID=""
stop_gateway() {
  if [[ -n "$GATEWAY_PID" ]]; then
    kill "$GATEWAY_PID" 2> /dev/null || true
    wait "$GATEWAY_PID" 2> /dev/null || true
    GATEWAY_PID=""
  fi
}

# start_milpa ERRLOG ARGS...: runs `milpa ARGS...` (a state folder of its own, an in-memory
# store) until it says where it serves MCP; sets GATEWAY_URL.
start_milpa() {
  local errlog=$1
  shift
  : > "$errlog"
  MILPA_HOME="$WORK/gateway-home" "$MILPA" --store memory "$@" 2> "$errlog" &
  GATEWAY_PID=$!
  GATEWAY_URL=$(await_url "milpa" "$GATEWAY_PID" "$errlog" 'serving MCP on')
}

# The same scenarios through the gateway in front of the fixture: what passes directly must
# pass through milpa. `milpa proxy` runs the fixture as its stdio child; `milpa serve` reaches
# it over HTTP as an `[[upstreams]] url` entry. Anonymous callers (the suite sends no token).
run_conformance_gateway() {
  install_node
  build_milpa
  local dir="$WORK/conformance-gateway"
  rm -rf "$dir" "$WORK/gateway-home"
  mkdir -p "$dir"
  printf '[channels.mcp]\nrequire_auth = false\n' > "$dir/proxy.toml"
  start_milpa "$dir/proxy.log" --manifest "$dir/proxy.toml" proxy --http 127.0.0.1:0 \
    --audit "$dir/proxy-audit.jsonl" -- "$BIN" --stdio
  log "conformance suite through milpa proxy at $GATEWAY_URL"
  conformance_scenarios "proxy " "$GATEWAY_URL"
  stop_gateway
  start_server "$dir/upstream-audit.jsonl"
  printf '[channels.mcp]\nrequire_auth = false\n\n[[upstreams]]\nname = "own"\nurl = "%s"\n' \
    "$URL" > "$dir/upstreams.toml"
  start_milpa "$dir/upstreams.log" --manifest "$dir/upstreams.toml" serve --http 127.0.0.1:0 \
    --audit "$dir/upstreams-audit.jsonl"
  log "conformance suite through an [[upstreams]] url entry at $GATEWAY_URL"
  conformance_scenarios "upstreams-url " "$GATEWAY_URL"
  stop_gateway
  stop_server
}

# The pre-release suite at --spec-version 2026-07-28 (the stateless revision), same fixture.
run_conformance_2026() {
  install_conformance_next
  start_server "$WORK/conformance-2026-audit.jsonl"
  log "conformance $CONFORMANCE_NEXT_VERSION (2026-07-28) against $URL"
  local out
  for scenario in "${CONFORMANCE_2026_SCENARIOS[@]}"; do
    out="$WORK/conformance-2026-$scenario.txt"
    if (cd "$WORK" && timeout 120 "$NODE" "$NEXT_DIR/node_modules/.bin/conformance" server \
      --url "$URL" --scenario "$scenario" --spec-version 2026-07-28 -o "$WORK/results-2026" > "$out" 2>&1) \
      && grep -Eq "^Passed: [0-9]+/[0-9]+, 0 failed, 0 warnings" "$out"; then
      PASSED=$((PASSED + 1))
      echo "ok - conformance 2026-07-28 $scenario ($(grep -E '^Passed:' "$out"))"
    else
      FAILED=$((FAILED + 1))
      echo "not ok - conformance 2026-07-28 $scenario"
      sed 's/^/    /' "$out"
    fi
  done
  stop_server
}

count() { # count OUTPUT_FILE: adds the client's "N passed, M failed" line to the totals
  local line
  line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$1" | tail -n1 || true)
  if [[ -z "$line" ]]; then
    FAILED=$((FAILED + 1))
    return
  fi
  PASSED=$((PASSED + $(echo "$line" | cut -d' ' -f1)))
  FAILED=$((FAILED + $(echo "$line" | cut -d' ' -f3)))
}

run_client() { # run_client NAME COMMAND...: runs one interop client over stdio and HTTP
  local name=$1
  shift
  local out="$WORK/$name-stdio.txt"
  "$@" --stdio "$BIN" "$WORK/$name-stdio-audit.jsonl" > "$out" 2>&1 || true
  grep -E '^(ok|not ok) ' "$out" || cat "$out"
  count "$out"
  start_server "$WORK/$name-http-audit.jsonl"
  out="$WORK/$name-http.txt"
  "$@" --http "$URL" "$WORK/$name-http-audit.jsonl" > "$out" 2>&1 || true
  grep -E '^(ok|not ok) ' "$out" || cat "$out"
  count "$out"
  stop_server
}

run_python() {
  install_python
  : > "$WORK/py-stdio-audit.jsonl"
  run_client py timeout 180 "$PY_DIR/bin/python" "$HERE/py_client.py"
}

run_node() {
  install_node
  : > "$WORK/ts-stdio-audit.jsonl"
  # The client resolves @modelcontextprotocol/sdk from the cache's node_modules.
  cp "$HERE/ts_client.mjs" "$NODE_DIR/ts_client.mjs"
  run_client ts timeout 180 "$NODE" "$NODE_DIR/ts_client.mjs"
  # The 2.x client negotiating 2026-07-28 (resolves its package from its own prefix).
  install_ts_client2
  : > "$WORK/ts2-stdio-audit.jsonl"
  cp "$HERE/ts2_client.mjs" "$CLIENT2_DIR/ts2_client.mjs"
  run_client ts2 timeout 180 "$NODE" "$CLIENT2_DIR/ts2_client.mjs"
}

# gateway_dir NAME: a fresh folder for one gateway client: the filesystem server's root with
# two files, and a manifest declaring that server with its writes parked for a person, our
# own fixture over Streamable HTTP at $OWN_URL (prefix `own__`), a Cedar policy forbidding
# reads of paths that name a secret, and a budget of 30 tokens an hour per caller and tool
# (a read costs 1, a write 5).
gateway_dir() {
  local dir="$WORK/gateway-$1"
  rm -rf "$dir"
  mkdir -p "$dir/root"
  printf 'hello from behind the gateway\n' > "$dir/root/hello.txt"
  printf 'the vault combination\n' > "$dir/root/secret.txt"
  cat > "$dir/policy.cedar" << 'EOF'
@id("no-secret-files")
forbid(principal, action, resource == Tool::"fs__read_text_file")
when { context.args has path && context.args.path like "*secret*" };
EOF
  cat > "$dir/gate.toml" << EOF
[rate_limit]
max_tokens = 30
window_seconds = 3600

[policy]
cedar = "$dir/policy.cedar"

[[upstreams]]
name = "fs"
command = ["$NODE", "$SERVERS_DIR/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js", "$dir/root"]

[upstreams.tools."write_*"]
confirm = "human"

[[upstreams]]
name = "own"
url = "$OWN_URL"
EOF
  : > "$dir/audit.jsonl"
  GATEWAY_DIR=$dir
}

# build_milpa: the `milpa` command (debug); sets MILPA.
build_milpa() {
  log "building the milpa command"
  (cd "$ROOT" && cargo build --quiet -p milpa-cli --bin milpa)
  MILPA="$TARGET_DIR/debug/milpa"
  [[ -x "$MILPA" ]] || { log "no binary at $MILPA"; exit 2; }
}

run_gateway() {
  install_node
  install_python
  install_servers
  build_milpa
  local milpa=$MILPA out
  local everything="$SERVERS_DIR/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
  # Our own fixture over HTTP, a third upstream of both clients' manifests.
  start_server "$WORK/gateway-own-audit.jsonl"
  OWN_URL=$URL
  gateway_dir py
  out="$WORK/gateway-py.txt"
  timeout 180 "$PY_DIR/bin/python" "$HERE/gateway_py.py" "$milpa" "$GATEWAY_DIR" "$NODE" "$everything" > "$out" 2>&1 || true
  grep -E '^(ok|not ok) ' "$out" || cat "$out"
  count "$out"
  gateway_dir ts
  out="$WORK/gateway-ts.txt"
  # The client resolves @modelcontextprotocol/sdk from the cache's node_modules.
  cp "$HERE/gateway_ts.mjs" "$NODE_DIR/gateway_ts.mjs"
  timeout 180 "$NODE" "$NODE_DIR/gateway_ts.mjs" "$milpa" "$GATEWAY_DIR" "$NODE" "$everything" > "$out" 2>&1 || true
  grep -E '^(ok|not ok) ' "$out" || cat "$out"
  count "$out"
  stop_server
}

mkdir -p "$WORK"
build
case "$WHAT" in
  all) run_conformance; run_conformance_2026; run_python; run_node; run_gateway; run_conformance_gateway ;;
  conformance) run_conformance; run_conformance_2026 ;;
  conformance-2026) run_conformance_2026 ;;
  python) run_python ;;
  node) run_node ;;
  gateway) run_gateway; run_conformance_gateway ;;
  *) log "usage: $0 [all|conformance|conformance-2026|python|node|gateway]"; exit 2 ;;
esac

echo "milpa-mcp-interop: $PASSED passed, $FAILED failed"
[[ "$FAILED" -eq 0 ]]
