#!/usr/bin/env bash
# make bench-generator: linkgate bench against other load generators, in
# closed-loop maximum-throughput mode, against the same tiny nginx target
# (one worker, `return 200`). The target is pinned to one core and each
# generator in turn to the other, so the figures compare the generators,
# not the machine:
#
#   plain     http://   linkgate vs Debian wrk and vegeta
#   https     https://  keep-alive, linkgate vs wrk (nginx `ssl`)
#   https-new https://  a new connection per request (Connection: close)
#   http2     https://  h2 by ALPN, linkgate --http2 vs h2load (nginx `http2`),
#                       H2_CONNS connections × STREAMS streams
#   pacing    linkgate -R5000: corrected vs uncorrected p50, send lag
#   agent     linkgate bench vs the same run on one linkgate bench agent
#             (--agents), the agent on the generators' core
#
# Rounds alternate their order; tools/benchcmp prints medians, ranges and
# per-round ratios. The TLS certificate is made at run time (benchcmp cert).
#
# Environment: RUNS (default 5), DURATION (default 5s), CONNS (default 50),
# GEN_CPU / TARGET_CPU (default 0 / 1), H2_CONNS / STREAMS (default 10 /
# 10), PARTS (default "plain https https-new http2 pacing").
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$LINKGATE_ROOT"
results_begin bench-generator # before the defaults: the command the run's JSON records

RUNS=${RUNS:-5}
DURATION=${DURATION:-5s}
CONNS=${CONNS:-50}
GEN_CPU=${GEN_CPU:-0}
TARGET_CPU=${TARGET_CPU:-1}
H2_CONNS=${H2_CONNS:-10}
STREAMS=${STREAMS:-10}
PARTS=${PARTS:-plain https https-new http2 pacing agent}

command -v nginx >/dev/null || die "nginx not installed (apt-get install nginx-light)"
command -v wrk >/dev/null || die "wrk not installed (apt-get install wrk)"
command -v h2load >/dev/null || die "h2load not installed (apt-get install nghttp2-client)"

mkdir -p .cache/bench
bin=.cache/bench/linkgate benchcmp=.cache/bench/benchcmp
go build -trimpath -o "$bin" ./cmd/linkgate
go build -o "$benchcmp" ./tools/benchcmp
vegeta=$(command -v vegeta || echo "$LINKGATE_ROOT/.cache/bin/vegeta")
if [ ! -x "$vegeta" ]; then
	step "go install vegeta (the anchor of the plain part)"
	GOBIN="$LINKGATE_ROOT/.cache/bin" GOFLAGS=-mod=mod go install github.com/tsenart/vegeta/v12@v12.13.0
fi

dir=$(mktemp -d)
"$benchcmp" cert "$dir/tls"
port=$(free_port) tls_port=$(free_port) h2_port=$(free_port)
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
    ssl_certificate $dir/tls/server.pem;
    ssl_certificate_key $dir/tls/server-key.pem;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_session_cache shared:SSL:10m;
    server {
        listen 127.0.0.1:$port;
        listen 127.0.0.1:$tls_port ssl;
        location / { return 200 "ok\n"; }
    }
    server {
        listen 127.0.0.1:$h2_port ssl http2;
        location / { return 200 "ok\n"; }
    }
}
CONF
taskset -c "$TARGET_CPU" nginx -p "$dir" -c "$dir/nginx.conf" &
nginx_pid=$!
trap 'kill $nginx_pid 2>/dev/null || true; wait $nginx_pid 2>/dev/null || true; rm -rf "$dir" "$results_run"' EXIT
wait_tcp 127.0.0.1 "$port" 10 || die "nginx did not start: $(cat "$dir/error.log")"
url=http://127.0.0.1:$port/ tls_url=https://127.0.0.1:$tls_port/ h2_url=https://127.0.0.1:$h2_port/
res=$dir/results.jsonl
echo "target: nginx 1 worker on cpu $TARGET_CPU; generators on cpu $GEN_CPU; -t1 -c$CONNS -d$DURATION; $RUNS runs, order alternating"

# run PART TARGET… measures one part; gencpu is each generator's own CPU
# time (user + system) per request, which shows its cost even when the
# target is what limits the rate.
run() {
	step "$1"
	shift
	"$benchcmp" run -o "$res" -cpu "$GEN_CPU" -rounds "$RUNS" -order alternate -t 1 -c "$CONNS" -d "$DURATION" \
		-linkgate "$bin" -vegeta "$vegeta" -h2load "$(command -v h2load)" "$@"
}
for part in $PARTS; do
	case $part in
	plain) run "plain HTTP: wrk, linkgate bench, vegeta" \
		-target "wrk $url gen=wrk" -target "linkgate $url gen=linkgate" -target "vegeta $url gen=vegeta" ;;
	https) run "HTTPS keep-alive: wrk, linkgate bench" \
		-target "wrk_tls $tls_url gen=wrk" -target "linkgate_tls $tls_url gen=linkgate arg=--ca=$dir/tls/ca.pem" ;;
	https-new) run "HTTPS, a new connection per request: wrk -H 'Connection: close', linkgate bench --no-keepalive" \
		-target "wrk_new $tls_url gen=wrk arg=-H arg=Connection:%20close" \
		-target "linkgate_new $tls_url gen=linkgate arg=--no-keepalive arg=--ca=$dir/tls/ca.pem" ;;
	http2) run "HTTP/2 (h2 by ALPN): h2load, linkgate bench --http2; $H2_CONNS connections × $STREAMS streams" \
		-target "h2load $h2_url gen=h2load c=$H2_CONNS m=$STREAMS" \
		-target "linkgate_h2 $h2_url gen=linkgate c=$H2_CONNS arg=--http2 arg=--streams=$STREAMS arg=--ca=$dir/tls/ca.pem" ;;
	pacing)
		# At 5k req/s against the same target, the corrected median must be
		# within 0.1 ms of the uncorrected one (wrk2's 1 ms timer adds ~0.8 ms).
		step "pacing at -R5000 (-t1 -c50 -d$DURATION)"
		"$benchcmp" run -o "$res" -cpu "$GEN_CPU" -rounds 3 -t 1 -c 50 -d "$DURATION" \
			-linkgate "$bin" -target "pace $url gen=linkgate R=5000 warmup=1s" ;;
	agent)
		# One agent on the generators' core, the coordinator beside it (it
		# waits on one HTTP request during the run): the agent's rate
		# against plain linkgate bench's. The agent's own CPU per request
		# is the "cpu" figure (pid=).
		agent_port=$(free_port) agent_token=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
		LINKGATE_TOKEN=$agent_token taskset -c "$GEN_CPU" "$bin" bench agent --listen "127.0.0.1:$agent_port" 2>"$dir/agent.log" &
		agent_pid=$!
		wait_tcp 127.0.0.1 "$agent_port" 10 || die "the agent did not start: $(cat "$dir/agent.log")"
		run "linkgate bench, plain and on one agent (--agents)" \
			-target "linkgate_plain $url gen=linkgate" \
			-target "linkgate_agent $url gen=linkgate pid=$agent_pid arg=--agents=127.0.0.1:$agent_port arg=--agents-token=$agent_token"
		kill "$agent_pid"; wait "$agent_pid" 2>/dev/null || true ;;
	*) die "unknown part $part (plain https https-new http2 pacing agent)" ;;
	esac
done

step "results (shared 2-core machine: read the ratios, not the absolute figures)"
publish_table "$benchcmp" "$res" <<'TABLE'
{{define "row" -}}
{{$n := index . 0}}{{$a := index . 1}}| {{index . 2}} | {{mr "%.0f" (vals $n "rps")}} | {{mr "%.2f" (vals $n "gencpu")}} | {{if eq $n $a}}1.000 (anchor){{else}}{{mr "%.3f" (per $n $a "rps")}}{{end}} | {{if eq $n $a}}{{else}}{{mr "%.3f" (per $a $n "gencpu")}}{{end}} | {{index . 3}} |
{{end -}}
| generator | req/s median (range) | generator CPU µs/request | req/s × anchor, per round | CPU efficiency (anchor/this) | goal |
|---|---|---|---|---|---|
{{if has "wrk" -}}
{{template "row" (list "wrk" "wrk" "plain: wrk" "")}}{{template "row" (list "linkgate" "wrk" "plain: linkgate bench" "≥ 1.0× wrk")}}{{template "row" (list "vegeta" "vegeta" "plain: vegeta" "")}}{{template "row" (list "linkgate" "vegeta" "plain: linkgate bench vs vegeta" "≫ vegeta")}}
{{- end}}{{if has "wrk_tls" -}}
{{template "row" (list "wrk_tls" "wrk_tls" "https keep-alive: wrk" "")}}{{template "row" (list "linkgate_tls" "wrk_tls" "https keep-alive: linkgate bench" "≥ 0.9× wrk")}}
{{- end}}{{if has "wrk_new" -}}
{{template "row" (list "wrk_new" "wrk_new" "https new connection per request: wrk" "")}}{{template "row" (list "linkgate_new" "wrk_new" "https new connection per request: linkgate bench" "≥ 0.9× wrk")}}
{{- end}}{{if has "h2load" -}}
{{template "row" (list "h2load" "h2load" "http2: h2load" "")}}{{template "row" (list "linkgate_h2" "h2load" "http2: linkgate bench --http2" "≥ 0.8× h2load")}}
{{- end}}{{if has "linkgate_agent" -}}
{{template "row" (list "linkgate_plain" "linkgate_plain" "agent: linkgate bench" "")}}| agent: linkgate bench --agents (one agent; CPU µs/request: the agent's) | {{mr "%.0f" (vals "linkgate_agent" "rps")}} | {{mr "%.2f" (vals "linkgate_agent" "cpu")}} | {{mr "%.3f" (per "linkgate_agent" "linkgate_plain" "rps")}} | | ≥ 0.95× linkgate bench |
{{- end}}
{{if has "pace" -}}
pacing at -R5000 (-t1 -c50):
{{range $i, $c := vals "pace" "p50"}}{{$u := index (vals "pace" "up50") $i}}  corrected p50 {{printf "%.3f" $c}} ms  uncorrected p50 {{printf "%.3f" $u}} ms  difference {{printf "%.3f" (sub $c $u)}} ms  send lag p99 {{printf "%.3f" (index (vals "pace" "lag99") $i)}} ms  achieved {{printf "%.0f" (index (vals "pace" "rps") $i)}}/s
{{end -}}
{{end -}}
TABLE
