#!/usr/bin/env bash
# One id, static requests: nginx `return 302`, an empty fasthttp handler
# (tools/enginebench) and linkgate serve side by side on SERVER_CPU, wrk on
# LOAD_CPU, ROUNDS rounds of DURATION (default 5s), with the server CPU
# time per request from /proc. Isolates what linkgate adds to the engine.
# Run it with LINKGATE_VISITS=false to leave visit counting out; with
# BASE=rev, linkgate built at rev is served too (its rounds interleaved).
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
[ -z "${BASE:-}" ] || base_build "$work" "$BASE"
exec 9>"$BENCH_LOCK"
flock 9
ep=$(free_port)
GOMAXPROCS=1 taskset -c "$SERVER_CPU" "$work/enginebench" -engine fasthttp -addr "127.0.0.1:$ep" >/dev/null &
epid=$!; pids+=("$epid")
lp=$(free_port)
GOMAXPROCS=1 taskset -c "$SERVER_CPU" "$work/linkgate" serve --addr "127.0.0.1:$lp" --store "pebble:$work/links" --log-level warn &
lpid=$!; pids+=("$lpid")
names='"nginx" "fasthttp-empty" "linkgate"'
base_target=()
if [ -n "${BASE:-}" ]; then
	bp=$(free_port)
	GOMAXPROCS=1 taskset -c "$SERVER_CPU" "$work/linkgate-base" serve --addr "127.0.0.1:$bp" --store "pebble:$work/links-base" --log-level warn &
	bpid=$!; pids+=("$bpid")
	wait_tcp 127.0.0.1 "$bp" 30 || die "the base did not start"
	bid=$(curl -s -X POST "127.0.0.1:$bp/shortenURL" -d '{"OriginalURL":"https://aws.amazon.com/ec2/graviton/"}' |
		sed -n 's/.*"shortURL" *: *"\([^"]*\)".*/\1/p')
	[ -n "$bid" ] || die "could not create a link on the base"
	base_target=(-target "base http://127.0.0.1:$bp/$bid pid=$bpid")
	names="$names \"base\""
fi
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
	-target "linkgate http://127.0.0.1:$lp/$id pid=$lpid" "${base_target[@]}"
# Medians, ranges and ratios to nginx: of req/s, and of CPU per request
# (nginx/x: the capacity ratio on a dedicated core).
table "$work/results.jsonl" <<TABLE
{{range list $names -}}
{{printf "%-15s" .}} req/s median {{printf "%7.0f" (med . "rps")}} ({{rng "%.0f" (vals . "rps")}})  CPU µs/request median {{printf "%.2f" (med . "cpu")}} ({{rng "%.2f" (vals . "cpu")}})  ratio to nginx: req/s {{printf "%.3f" (div (med . "rps") (med "nginx" "rps"))}}, CPU {{printf "%.3f" (div (med "nginx" "cpu") (med . "cpu"))}}
{{end -}}
TABLE
