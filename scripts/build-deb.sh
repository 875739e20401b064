#!/usr/bin/env bash
# Builds the Debian package of the `milpa` command with cargo-deb: the binary, its manual
# page and shell completions (made by the binary itself, from the same clap definition as
# --help), the starter manifest /etc/milpa/milpa.toml, the examples and the hardened,
# disabled systemd unit milpa.service (crates/milpa-cli/debian/). Prints the .deb's path.
#
#   scripts/build-deb.sh                 # the release profile (thin LTO, stripped)
#   MILPA_DEB_PROFILE=dev scripts/build-deb.sh   # CI: the tests' build, packaged as is
#
# cargo-deb is installed into MILPA_CI_CACHE (default ~/.cache/milpa-ci) when it is not on
# the PATH.
set -euo pipefail
cd "$(dirname "$0")/.."

profile="${MILPA_DEB_PROFILE:-release}"
ci_cache="${MILPA_CI_CACHE:-$HOME/.cache/milpa-ci}"
export PATH="$ci_cache/cargo-deb/bin:$PATH"
if ! command -v cargo-deb >/dev/null 2>&1; then
  echo "== installing cargo-deb into $ci_cache/cargo-deb" >&2
  cargo install cargo-deb --locked --root "$ci_cache/cargo-deb" >&2
fi

target_dir=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
case "$profile" in
  dev) out_dir="$target_dir/debug" ;;
  *) out_dir="$target_dir/$profile" ;;
esac

if [ "$profile" = dev ]; then
  # The tests' own build of the binary (`cargo test --workspace` unifies the features the
  # tests need, so `cargo build -p milpa-cli` would compile most of the workspace again):
  # nothing is compiled when the tests just ran.
  cargo test --workspace --locked --no-run >&2
else
  cargo build --locked --profile "$profile" -p milpa-cli --bin milpa >&2
fi
assets="$out_dir/deb-assets"
rm -rf "$assets"
mkdir -p "$assets"
"$out_dir/milpa" manpage | gzip -9n > "$assets/milpa.1.gz"
"$out_dir/milpa" completions bash > "$assets/milpa.bash"
"$out_dir/milpa" completions zsh > "$assets/_milpa"
"$out_dir/milpa" completions fish > "$assets/milpa.fish"

# --no-build: the binary above is the one packaged (cargo-deb would build it again with
# its own flags otherwise). The dev profile's binary keeps its line tables: not stripped.
strip=()
[ "$profile" = dev ] && strip=(--no-strip)
cargo deb -p milpa-cli --no-build --profile "$profile" "${strip[@]}" --output "$target_dir/debian/" >&2
ls -t "$target_dir"/debian/milpa_*.deb | head -n 1
