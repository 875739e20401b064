#!/usr/bin/env bash
# Runs every check and test of the workspace: formatting, lints, unit/behaviour/doc tests,
# then the interop suites that need external clients (when their crate is present).
set -euo pipefail
cd "$(dirname "$0")/.."

# What the tests start themselves (redis-server, Chromium, npm, python3-venv…): installed
# when missing, or a stop at once with the command that would.
scripts/install-test-deps.sh

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
