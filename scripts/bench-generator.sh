#!/usr/bin/env bash
# make bench-generator: linkgate bench against Debian wrk in closed-loop
# maximum-throughput mode, against the same tiny nginx target (one worker,
# `return 200`). The target is pinned to one core and each generator in turn
# to the other, so the figure compares the generators, not the machine.
# Prints each run, then medians, ranges and the ratio linkgate/wrk.
#
# Environment: RUNS (default 5), DURATION (default 5s), CONNS (default 50),
# GEN_CPU / TARGET_CPU (default 0 / 1).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$LINKGATE_ROOT"

RUNS=${RUNS:-5}
DURATION=${DURATION:-5s}
CONNS=${CONNS:-50}
GEN_CPU=${GEN_CPU:-0}
TARGET_CPU=${TARGET_CPU:-1}

command -v nginx >/dev/null || die "nginx not installed (apt-get install nginx-light)"
command -v wrk >/dev/null || die "wrk not installed (apt-get install wrk)"

bin=.cache/bench/linkgate
mkdir -p .cache/bench
go build -trimpath -o "$bin" ./cmd/linkgate

dir=$(mktemp -d)
port=$(free_port)
cat >"$dir/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 1000000;
    keepalive_timeout 120s;
    server {
        listen 127.0.0.1:$port;
        location / { return 200 "ok\n"; }
    }
}
CONF
taskset -c "$TARGET_CPU" nginx -p "$dir" -c "$dir/nginx.conf" &
nginx_pid=$!
trap 'kill $nginx_pid 2>/dev/null || true; wait $nginx_pid 2>/dev/null || true; rm -rf "$dir"' EXIT
wait_tcp 127.0.0.1 "$port" 10 || die "nginx did not start: $(cat "$dir/error.log")"
url=http://127.0.0.1:$port/

rps() { awk '/^Requests\/sec:/ {print $2}'; }
wrk_runs=() lg_runs=()
run_wrk() { taskset -c "$GEN_CPU" wrk -t1 -c"$CONNS" -d"$DURATION" "$url" | rps; }
run_lg() { taskset -c "$GEN_CPU" "$bin" bench -t1 -c"$CONNS" -d"$DURATION" "$url" | rps; }
echo "target: nginx 1 worker on cpu $TARGET_CPU; generators on cpu $GEN_CPU; -t1 -c$CONNS -d$DURATION; $RUNS runs, order alternating"
for i in $(seq "$RUNS"); do
	if ((i % 2)); then w=$(run_wrk); l=$(run_lg); else l=$(run_lg); w=$(run_wrk); fi
	printf 'run %d: wrk %10.0f req/s   linkgate %10.0f req/s\n' "$i" "$w" "$l"
	wrk_runs+=("$w") lg_runs+=("$l")
done

python3 - "${wrk_runs[*]}" "${lg_runs[*]}" <<'PY'
import statistics, sys
w = [float(x) for x in sys.argv[1].split()]
l = [float(x) for x in sys.argv[2].split()]
ratios = [b / a for a, b in zip(w, l)]
print(f"wrk      median {statistics.median(w):10.0f} req/s  range {min(w):.0f}-{max(w):.0f}")
print(f"linkgate median {statistics.median(l):10.0f} req/s  range {min(l):.0f}-{max(l):.0f}")
print(f"ratio linkgate/wrk: median {statistics.median(ratios):.3f}  range {min(ratios):.3f}-{max(ratios):.3f} (goal >= 0.8)")
PY

# Pacing: at 5k req/s against the same target, the corrected median must be
# within 0.1 ms of the uncorrected one (wrk2's 1 ms timer adds ~0.8 ms).
echo
echo "pacing at -R5000 (-t1 -c50 -d${DURATION}, generator on cpu $GEN_CPU):"
for i in $(seq 3); do
	taskset -c "$GEN_CPU" "$bin" bench -t1 -c50 -d"$DURATION" -R5000 --warmup 1s --json "$dir/pace.json" "$url" >/dev/null
	python3 - "$dir/pace.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
c, u = s["latency"]["percentiles_ms"]["50"], s["uncorrected_latency"]["percentiles_ms"]["50"]
lag = s["generator"]["send_lag"]["percentiles_ms"]["99"]
print(f"  corrected p50 {c:.3f} ms  uncorrected p50 {u:.3f} ms  difference {c-u:.3f} ms  send lag p99 {lag:.3f} ms  achieved {s['requests_per_sec']:.0f}/s")
PY
done
