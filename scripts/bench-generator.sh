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

# measure CMD…: prints "REQ_PER_SEC CPU_MICROSECONDS_PER_REQUEST" — the
# generator's own CPU time (user + system) per request, which shows its cost
# even when the target is what limits the rate.
measure() {
	python3 - "$@" <<'PY'
import resource, subprocess, sys
out = subprocess.run(sys.argv[1:], capture_output=True, text=True, check=True).stdout
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
rps = next(float(l.split()[1]) for l in out.splitlines() if l.startswith("Requests/sec:"))
reqs = next(int(l.split()[0]) for l in out.splitlines() if " requests in " in l)
print(f"{rps:.0f} {(ru.ru_utime + ru.ru_stime) * 1e6 / max(reqs, 1):.2f}")
PY
}
run_wrk() { measure taskset -c "$GEN_CPU" wrk -t1 -c"$CONNS" -d"$DURATION" "$url"; }
run_lg() { measure taskset -c "$GEN_CPU" "$bin" bench -t1 -c"$CONNS" -d"$DURATION" "$url"; }
echo "target: nginx 1 worker on cpu $TARGET_CPU; generators on cpu $GEN_CPU; -t1 -c$CONNS -d$DURATION; $RUNS runs, order alternating"
results=()
for i in $(seq "$RUNS"); do
	if ((i % 2)); then w=$(run_wrk); l=$(run_lg); else l=$(run_lg); w=$(run_wrk); fi
	read -r wr wc <<<"$w"
	read -r lr lc <<<"$l"
	printf 'run %d: wrk %8.0f req/s %6.2f us cpu/req   linkgate %8.0f req/s %6.2f us cpu/req\n' "$i" "$wr" "$wc" "$lr" "$lc"
	results+=("$wr,$wc,$lr,$lc")
done

python3 - "${results[@]}" <<'PY'
import statistics, sys
rows = [[float(x) for x in r.split(",")] for r in sys.argv[1:]]
w, wc, l, lc = zip(*rows)
med = statistics.median
ratios = [b / a for a, b in zip(w, l) if a > 0]
cpu = [a / b for a, b in zip(wc, lc) if b > 0]
print(f"wrk      median {med(w):8.0f} req/s  range {min(w):.0f}-{max(w):.0f}   cpu/req median {med(wc):.2f} us")
print(f"linkgate median {med(l):8.0f} req/s  range {min(l):.0f}-{max(l):.0f}   cpu/req median {med(lc):.2f} us")
print(f"ratio linkgate/wrk req/s: median {med(ratios):.3f}  range {min(ratios):.3f}-{max(ratios):.3f} (goal >= 0.8)")
print(f"ratio wrk/linkgate cpu per request (efficiency, > 1: linkgate cheaper): median {med(cpu):.3f}  range {min(cpu):.3f}-{max(cpu):.3f}")
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
