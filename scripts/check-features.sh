#!/usr/bin/env bash
# Checks milpa-mcp's features (issue 22): a stdio-only build links no HTTP server, JWT or TLS
# crate, and every feature builds on its own. Called from scripts/test-all.sh after clippy.
set -euo pipefail
cd "$(dirname "$0")/.."

# Crates a stdio-only build must not link: the HTTP server, JWT and TLS stacks, and the
# metrics encoder of `/metrics`.
FORBIDDEN=(axum hyper hyper-util hyper-rustls rustls tower-http jsonwebtoken webauthn-rs askama cookie prometheus)
FEATURES=(stdio http oauth approvals-page otel)

echo "== milpa-mcp: what a stdio-only build links"
# `--prefix none` prints one crate per line as `name vX.Y.Z`; `-e normal` leaves out build
# and dev dependencies, which never reach the binary.
tree=$(cargo tree -p milpa-mcp --no-default-features --features stdio -e normal --prefix none --quiet)
found=()
for crate in "${FORBIDDEN[@]}"; do
  if grep -q -E "^${crate} v" <<<"$tree"; then
    found+=("$crate")
  fi
done
if [ ${#found[@]} -gt 0 ]; then
  echo "error: a stdio-only milpa-mcp links ${found[*]}" >&2
  echo "(see: cargo tree -p milpa-mcp --no-default-features --features stdio -e normal -i ${found[0]})" >&2
  exit 1
fi

# Each feature alone builds, without warnings (cargo replays a cached build's warnings, so
# a warm run sees them too).
for feature in "${FEATURES[@]}"; do
  echo "== milpa-mcp: --no-default-features --features $feature"
  if ! out=$(cargo check -p milpa-mcp --lib --no-default-features --features "$feature" \
    --message-format short --quiet 2>&1); then
    echo "$out" >&2
    exit 1
  fi
  if grep -q -E "(^|: )warning" <<<"$out"; then
    echo "$out" >&2
    echo "error: milpa-mcp with only \`$feature\` builds with warnings" >&2
    exit 1
  fi
done

# milpa-cli without its default `wasm` feature (what the fuzz crate builds): no wasmtime,
# and a manifest's wasm tool is refused naming the feature.
echo "== milpa-cli: --no-default-features"
if ! out=$(cargo check -p milpa-cli --lib --bins --no-default-features \
  --message-format short --quiet 2>&1); then
  echo "$out" >&2
  exit 1
fi
if grep -q -E "(^|: )warning" <<<"$out"; then
  echo "$out" >&2
  echo "error: milpa-cli without default features builds with warnings" >&2
  exit 1
fi
if cargo tree -p milpa-cli --no-default-features -e normal --prefix none --quiet | grep -q -E "^wasmtime v"; then
  echo "error: milpa-cli without default features links wasmtime" >&2
  exit 1
fi
