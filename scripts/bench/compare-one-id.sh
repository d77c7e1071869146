#!/usr/bin/env bash
# One id, static requests: nginx `return 302`, an empty fasthttp handler
# (tools/enginebench) and linkgate serve side by side on SERVER_CPU, wrk on
# LOAD_CPU, ROUNDS rounds of DURATION (default 5s), with the server CPU
# time per request from /proc. Isolates what linkgate adds to the engine.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../bench-lib.sh"
cd "$LINKGATE_ROOT"
export GOTOOLCHAIN=local
DURATION=${DURATION:-5s}
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
go build -o "$work/enginebench" ./tools/enginebench
go build -trimpath -o "$work/linkgate" ./cmd/linkgate
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
	python3 -c 'import json,sys; print(json.load(sys.stdin)["shortURL"])')
echo "req/s and server CPU µs per request, one id, wrk -t1 -c$CONNS -d$DURATION"
for ((r = 0; r < ROUNDS; r++)); do
	echo "nginx $(wrk_run "http://127.0.0.1:$np/$id" "" "$npid")  fasthttp-empty $(wrk_run "http://127.0.0.1:$ep/$id" "" "$epid")  linkgate $(wrk_run "http://127.0.0.1:$lp/$id" "" "$lpid")"
done
