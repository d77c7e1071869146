#!/usr/bin/env bash
# One id, static requests: nginx `return 302`, an empty fasthttp handler
# (tools/enginebench) and linkgate serve side by side on SERVER_CPU, wrk on
# LOAD_CPU, ROUNDS rounds of DURATION (default 5s), with the server CPU
# time per request from /proc. Isolates what linkgate adds to the engine.
# Run it with LINKGATE_VISITS=false to leave visit counting out.
set -euo pipefail
DURATION=${DURATION:-5s}
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../bench-lib.sh"
cd "$LINKGATE_ROOT"
export GOTOOLCHAIN=local
bench_workdir # $work, $pids: killed and removed on exit
go build -o "$work/enginebench" ./tools/enginebench
go build -trimpath -o "$work/linkgate" ./cmd/linkgate
benchcmp_build "$work"
exec 9>"$BENCH_LOCK"
flock 9
ep=$(free_port)
GOMAXPROCS=1 taskset -c "$SERVER_CPU" "$work/enginebench" -engine fasthttp -addr "127.0.0.1:$ep" >/dev/null &
epid=$!; pids+=("$epid")
lp=$(free_port)
GOMAXPROCS=1 taskset -c "$SERVER_CPU" "$work/linkgate" serve --addr "127.0.0.1:$lp" --store "bolt:$work/links.db" --log-level warn &
lpid=$!; pids+=("$lpid")
np=$(free_port)
npid=$(start_nginx_302 "$work/nginx" "$np"); pids+=("$npid")
wait_tcp 127.0.0.1 "$lp" 30 && wait_tcp 127.0.0.1 "$ep" 10 && wait_tcp 127.0.0.1 "$np" 10 || die "a server did not start"
id=$(curl -s -X POST "127.0.0.1:$lp/shortenURL" -d '{"OriginalURL":"https://aws.amazon.com/ec2/graviton/"}' |
	sed -n 's/.*"shortURL" *: *"\([^"]*\)".*/\1/p')
[ -n "$id" ] || die "could not create a link"
echo "req/s and server CPU µs per request, one id, wrk -t1 -c$CONNS -d$DURATION"
measure "$work/results.jsonl" \
	-target "nginx http://127.0.0.1:$np/$id pid=$npid" \
	-target "fasthttp-empty http://127.0.0.1:$ep/$id pid=$epid" \
	-target "linkgate http://127.0.0.1:$lp/$id pid=$lpid"
# Medians, ranges and ratios to nginx: of req/s, and of CPU per request
# (nginx/x: the capacity ratio on a dedicated core).
table "$work/results.jsonl" <<'TABLE'
{{range list "nginx" "fasthttp-empty" "linkgate" -}}
{{printf "%-15s" .}} req/s median {{printf "%7.0f" (med . "rps")}} ({{rng "%.0f" (vals . "rps")}})  CPU µs/request median {{printf "%.2f" (med . "cpu")}} ({{rng "%.2f" (vals . "cpu")}})  ratio to nginx: req/s {{printf "%.3f" (div (med . "rps") (med "nginx" "rps"))}}, CPU {{printf "%.3f" (div (med "nginx" "cpu") (med . "cpu"))}}
{{end -}}
TABLE
