#!/usr/bin/env bash
# Installs what the tests start themselves and a fresh Debian machine lacks: a real
# redis-server (the Redis store's and the CLI's tests), Chromium and ChromeDriver (the
# approvals page in a headless browser), npm and python3-venv (the official SDK clients
# and third-party servers of the interop suite), OpenSSL's headers and pkg-config (the
# passkeys' webauthn-rs builds on openssl-sys), promtool (Debian's `prometheus`: the
# `/metrics` tests check the text with `promtool check metrics`), clang with lld, the
# WebAssembly runtime library and wasi-libc (milpa-wasm builds its test guests from C), and
# cargo's rustfmt and clippy.
#
# Nothing is installed when everything is there. As root it runs apt-get; otherwise it
# uses sudo when sudo works without a password, and else stops at once (exit 2) printing
# the one command that would install what is missing.
set -euo pipefail

if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo is required: install Rust (https://rustup.rs), then run this again" >&2
  exit 2
fi
for component in rustfmt clippy; do
  rustup component list --installed 2>/dev/null | grep -q "^$component" || rustup component add "$component"
done

packages=()
command -v redis-server >/dev/null 2>&1 || packages+=(redis-server)
command -v chromium >/dev/null 2>&1 || packages+=(chromium)
command -v chromedriver >/dev/null 2>&1 || packages+=(chromium-driver)
dpkg -s libssl-dev >/dev/null 2>&1 || packages+=(libssl-dev)
command -v pkg-config >/dev/null 2>&1 || packages+=(pkg-config)
command -v npm >/dev/null 2>&1 || packages+=(npm)
command -v python3 >/dev/null 2>&1 || packages+=(python3)
python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || packages+=(python3-venv)
command -v promtool >/dev/null 2>&1 || packages+=(prometheus)
command -v clang >/dev/null 2>&1 || packages+=(clang)
command -v wasm-ld >/dev/null 2>&1 || packages+=(lld)
dpkg -s libclang-rt-dev-wasm32 >/dev/null 2>&1 || packages+=(libclang-rt-dev-wasm32)
dpkg -s wasi-libc >/dev/null 2>&1 || packages+=(wasi-libc)

if [ "${#packages[@]}" -eq 0 ]; then
  exit 0
fi
sudo=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true >/dev/null 2>&1; then
    sudo=(sudo)
  else
    echo "The tests need: ${packages[*]}. Install them with:" >&2
    echo "  sudo apt-get install -y --no-install-recommends ${packages[*]}" >&2
    exit 2
  fi
fi
echo "== installing ${packages[*]}"
install=("${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${packages[@]}")
if ! "${install[@]}"; then
  "${sudo[@]}" apt-get update
  "${install[@]}"
fi
