#!/usr/bin/env bash
# What a proxy adds per call over stdio, in front of the same upstream (rmcp-add's `add`),
# one call in flight and 32: `milpa proxy` (the gateway's hand-written MCP client, with
# milpa's pipeline) against `rmcp-proxy` (bench/rmcp-add/src/bin/rmcp-proxy.rs: an rmcp
# server forwarding to rmcp's client, no policy), both against the upstream called directly.
#
#   cargo build --release -p milpa-cli --bin milpa --no-default-features -p milpa-mcp --example bench_stdio
#   cargo build --release --manifest-path bench/rmcp-add/Cargo.toml
#   bench/proxy_overhead.sh [--rounds 3] [--seconds 2] [--upstream pipes|stdio]
#
# Each round is one `bench_stdio` run with fresh processes: the upstream called directly,
# `milpa --store memory proxy --audit /dev/null --name up --prefix up__ -- rmcp-add` and
# `rmcp-proxy --prefix up__ -- rmcp-add` (started through a shim that takes bench_stdio's
# `--proxy` arguments, then `exec`s it), measured in turn at 1 in flight, then in turn at 32;
# the two proxies swap places from one round to the next. Printed: calls/s, the median of
# the rounds (with their range), and what each proxy adds, from the medians: at 1 in flight
# 1e6/rate_proxy - 1e6/rate_direct, the µs each call spends in the proxy; at 32 in flight the
# same formula on throughput, "µs per call of throughput lost" (with the range of the
# rounds' own paired figures); and the machine's load before and after. `--upstream` is
# rmcp-add's transport (`pipes`, its default, or rmcp's `stdio()`). milpa gets a state folder
# (MILPA_HOME) under a temporary folder deleted at the end. MILPA_BIN names another `milpa`.
set -euo pipefail

rounds=3
seconds=2
upstream_mode=pipes
while [[ $# -gt 0 ]]; do
    case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --seconds) seconds="$2"; shift 2 ;;
    --upstream) upstream_mode="$2"; shift 2 ;;
    *) echo "usage: $0 [--rounds N] [--seconds S] [--upstream pipes|stdio]" >&2; exit 2 ;;
    esac
done

root="$(cd "$(dirname "$0")/.." && pwd)"
# Where cargo put the release builds (CARGO_TARGET_DIR when set, as cargo reads it).
target="${CARGO_TARGET_DIR:-$root/target}"
milpa="${MILPA_BIN:-$target/release/milpa}"
bench_stdio="$target/release/examples/bench_stdio"
rmcp_target="${CARGO_TARGET_DIR:-$root/bench/rmcp-add/target}"
upstream="$rmcp_target/release/rmcp-add"
rmcp_proxy="$rmcp_target/release/rmcp-proxy"
for binary in "$milpa" "$bench_stdio" "$upstream" "$rmcp_proxy"; do
    [[ -x "$binary" ]] || { echo "$binary is missing: build it first (see the top of $0)" >&2; exit 2; }
done

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/home"

# bench_stdio's `--proxy P` runs `P --store memory proxy --audit F --name N --prefix X -- CMD…`
# (milpa's syntax); the shim keeps the prefix and the command and becomes rmcp-proxy (exec:
# no process in between).
shim="$tmp/rmcp-proxy-shim"
cat >"$shim" <<EOF
#!/usr/bin/env bash
prefix=""
while [[ \$# -gt 0 && "\$1" != "--" ]]; do
    if [[ "\$1" == --prefix ]]; then prefix="\$2"; shift 2; else shift; fi
done
exec "$rmcp_proxy" --prefix "\$prefix" "\$@"
EOF
chmod +x "$shim"

results="$tmp/results"
: >"$results"
# The machine's own noise: its load, and the share of CPU time the hypervisor took away
# (steal) while the rounds ran; figures from a sitting with much steal are not comparable.
cpu_times() { awk '/^cpu /{print $2+$3+$4+$5+$6+$7+$8+$9, $9}' /proc/stat; }
read -r total_before steal_before < <(cpu_times)
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq "$rounds"); do
    if (( round % 2 )); then order=(milpa rmcp); else order=(rmcp milpa); fi
    proxy_args=()
    for proxy in "${order[@]}"; do
        if [[ "$proxy" == milpa ]]; then proxy_args+=(--proxy "$milpa"); else proxy_args+=(--proxy "$shim"); fi
    done
    if ! out="$(MILPA_HOME="$tmp/home" "$bench_stdio" --rounds 1 --seconds "$seconds" \
        "${proxy_args[@]}" -- "$upstream" "$upstream_mode" 2>"$tmp/stderr")"; then
        echo "bench_stdio failed in round $round:" >&2
        cat "$tmp/stderr" >&2
        exit 1
    fi
    # bench_stdio's rows: "stdio direct, 1 in flight:", "stdio proxy1, …", "stdio proxy2, …".
    for flight in 1 32; do
        for row in direct:direct proxy1:"${order[0]}" proxy2:"${order[1]}"; do
            rate="$(grep "stdio ${row%%:*}, $flight in flight" <<<"$out" | grep -o '[0-9]* calls/s' | cut -d' ' -f1)"
            [[ -n "$rate" ]] || { echo "no ${row%%:*} row at $flight in flight:" >&2; echo "$out" >&2; exit 1; }
            echo "$flight ${row#*:} $rate" >>"$results"
        done
    done
    echo "round $round done (order: direct ${order[*]}; load $(cut -d' ' -f1 /proc/loadavg))" >&2
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
read -r total_after steal_after < <(cpu_times)
echo "steal during the rounds: $(( 100 * (steal_after - steal_before) / (total_after - total_before + 1) ))% of CPU time"

python3 - "$results" "$rounds" "$seconds" "$upstream_mode" <<'EOF'
import statistics, sys
from collections import defaultdict
path, rounds, seconds, mode = sys.argv[1:5]
rates = defaultdict(list)
for line in open(path):
    flight, who, rate = line.split()
    rates[(int(flight), who)].append(float(rate))
names = {"direct": "direct (rmcp-add)", "milpa": "milpa proxy", "rmcp": "rmcp-proxy"}
print(f"upstream: rmcp-add {mode}; calls/s, median of {rounds} interleaved rounds of {seconds} s (range)")
print("| in flight | " + " | ".join(names.values()) + " |")
print("|---|---|---|---|")
for flight in (1, 32):
    cells = []
    for who in names:
        v = rates[(flight, who)]
        cells.append(f"{statistics.median(v):,.0f} ({min(v):,.0f}-{max(v):,.0f})")
    print(f"| {flight} | " + " | ".join(cells) + " |")
print()
print("added by each proxy, 1e6/rate_proxy - 1e6/rate_direct from the medians "
      "(range: the same from each round's own pair)")
print("| in flight | what | milpa proxy | rmcp-proxy |")
print("|---|---|---|---|")
for flight in (1, 32):
    what = "µs per call" if flight == 1 else "µs per call of throughput lost"
    direct = rates[(flight, "direct")]
    cells = []
    for who in ("milpa", "rmcp"):
        proxy = rates[(flight, who)]
        median = 1e6 / statistics.median(proxy) - 1e6 / statistics.median(direct)
        paired = [1e6 / p - 1e6 / d for p, d in zip(proxy, direct)]
        cells.append(f"{median:.1f} ({min(paired):.1f} to {max(paired):.1f})")
    print(f"| {flight} | {what} | " + " | ".join(cells) + " |")
EOF
