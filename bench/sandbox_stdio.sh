#!/usr/bin/env bash
# What a sandboxed tool costs over stdio: `tools/call` of a native `#[tool]`, of a
# WebAssembly component and of a command tool running /bin/true, served by one kind of
# server (the milpa-cli example `own_tools`, whose `shout` is native, with a manifest adding
# the other two), at 1 and 32 calls in flight, rounds alternating between them
# (`bench_stdio --tool … --tool …`, one server process per tool).
#
#   cargo build --release -p milpa-cli --example own_tools -p milpa-mcp --example bench_stdio
#   cargo build --release -p milpa-wasm --features componentize --example build_tool
#   bench/sandbox_stdio.sh [--rounds 5] [--seconds 2]
#
# The component is `crates/milpa-wasm/tests/guests/echo.c` (it answers its arguments),
# built here with clang and wasi-libc (`scripts/install-test-deps.sh` installs them) into a
# temporary folder, deleted at the end with the servers' state folder.
set -euo pipefail

rounds=5
seconds=2
while [[ $# -gt 0 ]]; do
    case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --seconds) seconds="$2"; shift 2 ;;
    *) echo "usage: $0 [--rounds N] [--seconds S]" >&2; exit 2 ;;
    esac
done

root="$(cd "$(dirname "$0")/.." && pwd)"
release="${CARGO_TARGET_DIR:-$root/target}/release"
for binary in examples/own_tools examples/bench_stdio examples/build_tool; do
    [[ -x "$release/$binary" ]] || { echo "$release/$binary is missing: build it first (see the top of $0)" >&2; exit 2; }
done
command -v clang > /dev/null || { echo "clang is missing (scripts/install-test-deps.sh)" >&2; exit 2; }

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

clang --target=wasm32-wasi -mexec-model=reactor -O2 -Wl,--strip-debug \
    -o "$tmp/echo.core.wasm" "$root/crates/milpa-wasm/tests/guests/echo.c"
"$release/examples/build_tool" "$tmp/echo.core.wasm" "$tmp/echo.wasm" >&2

cat > "$tmp/bench.toml" << 'EOF'
[[tools]]
name = "wasm_echo"
description = "Answers its arguments, in a sandbox"
wasm = "echo.wasm"
timeout_seconds = 10

[tools.params.text]
type = "string"
required = true

[[tools]]
name = "true_command"
description = "Runs /bin/true"
command = ["/bin/true"]
timeout_seconds = 10

[tools.params.text]
type = "string"
required = true
EOF

echo "load: $(uptime)"
MILPA_HOME="$tmp/home" "$release/examples/bench_stdio" --rounds "$rounds" --seconds "$seconds" \
    --arguments '{"text":"hello"}' --tool shout --tool wasm_echo --tool true_command -- \
    "$release/examples/own_tools" --manifest "$tmp/bench.toml" --store memory serve --audit /dev/null
echo "load: $(uptime)"
