#!/usr/bin/env bash
# Throughput against rmcp, interleaved: rmcp, milpa with its default SQLite store (what
# `milpa serve` gets without configuration) and milpa with `--store memory`, over stdio and
# over Streamable HTTP (SSE answers, protocol 2025-06-18), one call in flight and many.
#
#   cargo build --release -p milpa-cli --bin milpa -p milpa-mcp --example bench_stdio --example bench_http
#   cargo build --release --manifest-path bench/rmcp-add/Cargo.toml
#   bench/compare.sh [--rounds 3] [--seconds 2] [--connections 16]
#
# Every round measures every server in turn (stdio: a fresh server per measurement, warmed
# up by `bench_stdio`; HTTP: one server each for the whole run), so a noisy machine hits
# them alike. Printed: the median of the rounds (with their range) and the ratio of each
# milpa median to rmcp's, and the machine's load before and after. Each `milpa` gets a
# state folder of its own (MILPA_HOME) under a temporary folder deleted at the end.
# MILPA_BIN names another `milpa` binary to measure (a build of an earlier commit, say).
set -euo pipefail

rounds=3
seconds=2
connections=16
while [[ $# -gt 0 ]]; do
    case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --seconds) seconds="$2"; shift 2 ;;
    --connections) connections="$2"; shift 2 ;;
    *) echo "usage: $0 [--rounds N] [--seconds S] [--connections N]" >&2; exit 2 ;;
    esac
done

root="$(cd "$(dirname "$0")/.." && pwd)"
# Where cargo put the release build (CARGO_TARGET_DIR when set, as cargo reads it).
target="${CARGO_TARGET_DIR:-$root/target}"
milpa="${MILPA_BIN:-$target/release/milpa}"
bench_stdio="$target/release/examples/bench_stdio"
bench_http="$target/release/examples/bench_http"
rmcp="$root/bench/rmcp-add/target/release/rmcp-add"
for binary in "$milpa" "$bench_stdio" "$bench_http" "$rmcp"; do
    [[ -x "$binary" ]] || { echo "$binary is missing: build it first (see the top of $0)" >&2; exit 2; }
done

tmp="$(mktemp -d)"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT

# A free loopback port, from the kernel.
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# Waits (up to 10 s) until FILE has a line matching PATTERN; prints that line.
wait_for_line() {
    local file="$1" pattern="$2"
    for _ in $(seq 100); do
        if grep -q -- "$pattern" "$file" 2>/dev/null; then
            grep -m1 -- "$pattern" "$file"
            return 0
        fi
        sleep 0.1
    done
    echo "timed out waiting for '$pattern' in $file:" >&2
    cat "$file" >&2
    return 1
}

# HTTP servers, started once.
port_rmcp="$(free_port)"
"$rmcp" http "127.0.0.1:$port_rmcp" 2>"$tmp/rmcp-http.log" &
pids+=($!)
wait_for_line "$tmp/rmcp-http.log" "serving" >/dev/null

declare -A http_url http_token
http_url[rmcp]="http://127.0.0.1:$port_rmcp/mcp"
http_token[rmcp]=""
for store in default memory; do
    port="$(free_port)"
    mkdir -p "$tmp/http-$store"
    if [[ "$store" == memory ]]; then
        MILPA_HOME="$tmp/http-$store" "$milpa" --store memory serve --http "127.0.0.1:$port" \
            2>"$tmp/http-$store.log" &
    else
        MILPA_HOME="$tmp/http-$store" "$milpa" serve --http "127.0.0.1:$port" \
            2>"$tmp/http-$store.log" &
    fi
    pids+=($!)
    line="$(wait_for_line "$tmp/http-$store.log" "agent token")"
    http_token[$store]="$(awk '{print $NF}' <<<"$line")"
    http_url[$store]="http://127.0.0.1:$port/mcp"
done

stdio_command() {
    case "$1" in
    rmcp) echo "$rmcp pipes" ;;
    default) echo "env MILPA_HOME=$tmp/stdio-default $milpa serve" ;;
    memory) echo "env MILPA_HOME=$tmp/stdio-memory $milpa --store memory serve" ;;
    esac
}
mkdir -p "$tmp/stdio-default" "$tmp/stdio-memory"

servers=(rmcp default memory)
results="$tmp/results"
: >"$results"
# The machine's own noise: its load, and the share of CPU time the hypervisor took away
# (steal) while the rounds ran; figures from a sitting with much steal are not comparable.
cpu_times() { awk '/^cpu /{print $2+$3+$4+$5+$6+$7+$8+$9, $9}' /proc/stat; }
read -r total_before steal_before < <(cpu_times)
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq "$rounds"); do
    for server in "${servers[@]}"; do
        # shellcheck disable=SC2046
        out="$("$bench_stdio" --rounds 1 --seconds "$seconds" -- $(stdio_command "$server") 2>/dev/null)"
        one="$(grep '1 in flight' <<<"$out" | grep -o '[0-9]* calls/s' | head -1 | cut -d' ' -f1)"
        many="$(grep '32 in flight' <<<"$out" | grep -o '[0-9]* calls/s' | head -1 | cut -d' ' -f1)"
        echo "stdio-1 $server $one" >>"$results"
        echo "stdio-32 $server $many" >>"$results"

        token_args=()
        [[ -n "${http_token[$server]}" ]] && token_args=(--token "${http_token[$server]}")
        out="$("$bench_http" --rounds 1 --seconds "$seconds" --connections "$connections" \
            --revisions 2025-06-18 --url "${http_url[$server]}" "${token_args[@]}")"
        one="$(grep ', 1 connection:' <<<"$out" | grep -o '[0-9]* calls/s' | cut -d' ' -f1)"
        many="$(grep " $connections connections:" <<<"$out" | grep -o '[0-9]* calls/s' | cut -d' ' -f1)"
        echo "http-1 $server $one" >>"$results"
        echo "http-$connections $server $many" >>"$results"
        echo "round $round: $server done" >&2
    done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
read -r total_after steal_after < <(cpu_times)
echo "steal during the rounds: $(( 100 * (steal_after - steal_before) / (total_after - total_before + 1) ))% of CPU time"

python3 - "$results" "$rounds" "$seconds" <<'EOF'
import statistics, sys
from collections import defaultdict
path, rounds, seconds = sys.argv[1], sys.argv[2], sys.argv[3]
rates = defaultdict(list)
order = []
for line in open(path):
    work, server, rate = line.split()
    if work not in order:
        order.append(work)
    rates[(work, server)].append(float(rate))
print(f"calls/s, median of {rounds} interleaved rounds of {seconds} s (range); ratio = milpa / rmcp")
print("| work | rmcp | milpa default store | milpa --store memory |")
print("|---|---|---|---|")
names = {"stdio-1": "stdio, 1 in flight", "stdio-32": "stdio, 32 in flight",
         "http-1": "HTTP SSE, 1 connection"}
for work in order:
    base = statistics.median(rates[(work, "rmcp")])
    cells = []
    for server in ("rmcp", "default", "memory"):
        values = rates[(work, server)]
        median = statistics.median(values)
        cell = f"{median:,.0f} ({min(values):,.0f}-{max(values):,.0f})"
        if server != "rmcp":
            cell += f" = x{median / base:.2f}"
        cells.append(cell)
    label = names.get(work, work.replace("http-", "HTTP SSE, ") + " connections")
    print(f"| {label} | " + " | ".join(cells) + " |")
EOF
