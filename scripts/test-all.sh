#!/usr/bin/env bash
# Runs every check and test of the workspace: formatting, lints, unit/behaviour/doc tests,
# then the interop suites that need external clients (when their crate is present).
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets -- -D warnings
echo "== features"
scripts/check-features.sh
echo "== cargo doc"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet
echo "== cargo test"
cargo test --workspace
if [ -x crates/milpa-mcp/interop/run.sh ]; then
  echo "== MCP interop and conformance"
  crates/milpa-mcp/interop/run.sh
fi
