#!/usr/bin/env bash
# make bench-engines: a trivial redirect served by net/http and by fasthttp,
# against nginx 1-worker `return 302`, all pinned to one core with wrk on the
# other, rounds interleaved. The evidence for the HTTP engine choice in
# docs/serve-benchmarks.md.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/bench-lib.sh"
cd "$LINKGATE_ROOT"
export GOTOOLCHAIN=local

bench_workdir # $work, $pids: killed and removed on exit

go build -o "$work/enginebench" ./tools/enginebench
benchcmp_build "$work"

exec 9>"$BENCH_LOCK"
flock 9
echo "bench-engines: servers on CPU $SERVER_CPU (GOMAXPROCS=1), wrk -t1 -c$CONNS -d$DURATION on CPU $LOAD_CPU, $ROUNDS rounds interleaved"

port=$(free_port)
pids+=("$(start_nginx_302 "$work/nginx" "$port")")
targets=(-target "nginx http://127.0.0.1:$port/x")
wait_tcp 127.0.0.1 "$port" 10 || die "nginx did not start: $(cat "$work/nginx/logs/"*)"
for variant in nethttp fasthttp fasthttp-timeouts; do
	engine=${variant%-timeouts} flags=()
	[ "$variant" != "$engine" ] && flags=(-timeouts)
	port=$(free_port)
	GOMAXPROCS=1 taskset -c "$SERVER_CPU" "$work/enginebench" -engine "$engine" "${flags[@]}" -addr "127.0.0.1:$port" >/dev/null &
	pids+=($!)
	wait_tcp 127.0.0.1 "$port" 10 || die "$engine did not start"
	targets+=(-target "$variant http://127.0.0.1:$port/x")
done
measure "$work/results.jsonl" "${targets[@]}"

table "$work/results.jsonl" <<'TABLE'
{{report "nginx return 302 (1 worker)" "nginx"}}
{{range list "nethttp" "fasthttp" "fasthttp-timeouts" -}}
{{report (printf "%s trivial 302" .) .}}
  ratio to nginx: {{printf "%.3f" (div (med . "rps") (med "nginx" "rps"))}}
{{end -}}
TABLE
