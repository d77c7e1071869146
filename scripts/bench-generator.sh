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

go build -o .cache/bench/benchcmp ./tools/benchcmp
res=$dir/results.jsonl
echo "target: nginx 1 worker on cpu $TARGET_CPU; generators on cpu $GEN_CPU; -t1 -c$CONNS -d$DURATION; $RUNS runs, order alternating"
# gencpu is the generator's own CPU time (user + system) per request,
# which shows its cost even when the target is what limits the rate.
.cache/bench/benchcmp run -o "$res" -cpu "$GEN_CPU" -rounds "$RUNS" -order alternate -t 1 -c "$CONNS" -d "$DURATION" \
	-linkgate "$bin" -target "wrk $url gen=wrk" -target "linkgate $url gen=linkgate"

# Pacing: at 5k req/s against the same target, the corrected median must be
# within 0.1 ms of the uncorrected one (wrk2's 1 ms timer adds ~0.8 ms).
.cache/bench/benchcmp run -o "$res" -cpu "$GEN_CPU" -rounds 3 -t 1 -c 50 -d "$DURATION" \
	-linkgate "$bin" -target "pace $url gen=linkgate R=5000 warmup=1s"

.cache/bench/benchcmp report "$res" <<'TABLE'
{{range $i, $w := vals "wrk" "rps" -}}
run {{inc $i}}: wrk {{printf "%8.0f" $w}} req/s {{printf "%6.2f" (index (vals "wrk" "gencpu") $i)}} us cpu/req   linkgate {{printf "%8.0f" (index (vals "linkgate" "rps") $i)}} req/s {{printf "%6.2f" (index (vals "linkgate" "gencpu") $i)}} us cpu/req
{{end -}}
wrk      median {{printf "%8.0f" (med "wrk" "rps")}} req/s  range {{rng "%.0f" (vals "wrk" "rps")}}   cpu/req median {{printf "%.2f" (med "wrk" "gencpu")}} us
linkgate median {{printf "%8.0f" (med "linkgate" "rps")}} req/s  range {{rng "%.0f" (vals "linkgate" "rps")}}   cpu/req median {{printf "%.2f" (med "linkgate" "gencpu")}} us
{{with per "linkgate" "wrk" "rps"}}ratio linkgate/wrk req/s: median {{printf "%.3f" (median .)}}  range {{rng "%.3f" .}} (goal >= 0.8){{end}}
{{with per "wrk" "linkgate" "gencpu"}}ratio wrk/linkgate cpu per request (efficiency, > 1: linkgate cheaper): median {{printf "%.3f" (median .)}}  range {{rng "%.3f" .}}{{end}}
TABLE
echo
echo "pacing at -R5000 (-t1 -c50 -d${DURATION}, generator on cpu $GEN_CPU):"
.cache/bench/benchcmp report "$res" <<'TABLE'
{{range $i, $c := vals "pace" "p50"}}{{$u := index (vals "pace" "up50") $i}}  corrected p50 {{printf "%.3f" $c}} ms  uncorrected p50 {{printf "%.3f" $u}} ms  difference {{printf "%.3f" (sub $c $u)}} ms  send lag p99 {{printf "%.3f" (index (vals "pace" "lag99") $i)}} ms  achieved {{printf "%.0f" (index (vals "pace" "rps") $i)}}/s
{{end -}}
TABLE
