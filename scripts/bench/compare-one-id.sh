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
rps_n=() cpu_n=() rps_e=() cpu_e=() rps_l=() cpu_l=()
for ((r = 0; r < ROUNDS; r++)); do
	read -r a b <<<"$(wrk_run "http://127.0.0.1:$np/$id" "" "$npid")"; rps_n+=("$a") cpu_n+=("$b")
	read -r c d <<<"$(wrk_run "http://127.0.0.1:$ep/$id" "" "$epid")"; rps_e+=("$c") cpu_e+=("$d")
	read -r e f <<<"$(wrk_run "http://127.0.0.1:$lp/$id" "" "$lpid")"; rps_l+=("$e") cpu_l+=("$f")
	echo "nginx $a $b  fasthttp-empty $c $d  linkgate $e $f"
done
# Medians, ranges and ratios to nginx: of req/s, and of CPU per request
# (nginx/x: the capacity ratio on a dedicated core).
summary() { # NAME "REQ/S..." "CPU..."
	local name=$1 rps cpu
	read -ra rps <<<"$2"
	read -ra cpu <<<"$3"
	printf '%-15s req/s median %7.0f (%s)  CPU µs/request median %s (%s)  ratio to nginx: req/s %s, CPU %s\n' \
		"$name" "$(median "${rps[@]}")" "$(range "${rps[@]}")" "$(median "${cpu[@]}")" \
		"$(printf '%s\n' "${cpu[@]}" | sort -g | awk 'NR==1{lo=$1} {hi=$1} END {printf "%.2f–%.2f", lo, hi}')" \
		"$(ratio "$(median "${rps[@]}")" "$(median "${rps_n[@]}")")" "$(ratio "$(median "${cpu_n[@]}")" "$(median "${cpu[@]}")")"
}
summary nginx "${rps_n[*]}" "${cpu_n[*]}"
summary fasthttp-empty "${rps_e[*]}" "${cpu_e[*]}"
summary linkgate "${rps_l[*]}" "${cpu_l[*]}"
