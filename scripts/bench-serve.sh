#!/usr/bin/env bash
# make bench-serve: linkgate serve's redirect and create throughput on one
# core, against nginx `return 302` (1 worker) on the same core as the
# ceiling. Results and their reading: docs/serve-benchmarks.md.
#
#  - a bolt store preloaded with N (1,000,000) links, cached in .cache/bench
#    and copied fresh for every run;
#  - the server pinned to SERVER_CPU with GOMAXPROCS=1, Debian wrk pinned
#    to LOAD_CPU: -t1 -c50 -d10s, ROUNDS (3) rounds, medians;
#  - (a) GET /{id} over random preloaded ids (scripts/bench/redirect.lua),
#    (b) nginx driven by the same script, rounds interleaved with (a);
#    (a1)/(b1) the same with one id and a static request (no Lua), since
#    wrk's Lua can cap (a) and (b) alike;
#    (c) POST /shortenURL with a unique URL per request (create.lua) into
#    the 1M-link store, and (c0) the same into a fresh, empty store;
#  - the server's resident memory after the redirect rounds.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/bench-lib.sh"
cd "$LINKGATE_ROOT"
export GOTOOLCHAIN=local
N=${N:-1000000}
IDS_LIMIT=${IDS_LIMIT:-0}

bench_workdir # $work, $pids: killed and removed on exit

preloaded_links "$work" "$N"
cp "$links_db" "$work/links.db"
export IDS_LIMIT

exec 9>"$BENCH_LOCK"
step "waiting for $BENCH_LOCK"
flock 9
echo "server on CPU $SERVER_CPU (GOMAXPROCS=1); wrk -t1 -c$CONNS -d$DURATION on CPU $LOAD_CPU; $ROUNDS rounds; $N preloaded links"

nginx_port=$(free_port)
pids+=("$(start_nginx_302 "$work/nginx" "$nginx_port")")
lg_port=$(free_port)
GOMAXPROCS=1 taskset -c "$SERVER_CPU" "$work/linkgate" serve --addr "127.0.0.1:$lg_port" \
	--store "bolt:$work/links.db" --log-level warn >"$work/linkgate.log" 2>&1 &
lg_pid=$!
pids+=("$lg_pid")
wait_tcp 127.0.0.1 "$nginx_port" 10 || die "nginx did not start"
wait_tcp 127.0.0.1 "$lg_port" 30 || die "linkgate did not start: $(cat "$work/linkgate.log")"

nginx_url=http://127.0.0.1:$nginx_port/
lg_url=http://127.0.0.1:$lg_port/
lua=scripts/bench/redirect.lua
step "warm-up (page cache, connections; not counted)"
DURATION=3s wrk_rps "$lg_url" "$lua" >/dev/null
DURATION=2s wrk_rps "$nginx_url" "$lua" >/dev/null

step "redirects: nginx and linkgate, rounds interleaved"
# (a)/(b): random ids through the Lua script — realistic, but wrk's Lua
# costs CPU on the load core, so both can be capped by wrk itself.
# (a1)/(b1): one id, a static request (no Lua): the server-bound ratio.
one_id=$(head -1 "$IDS_FILE")
nginx_pid=${pids[0]}
nginx=() lg=() nginx1=() lg1=() cpu_nginx=() cpu_lg=() cpu_nginx1=() cpu_lg1=()
for ((r = 0; r < ROUNDS; r++)); do
	read -r x c <<<"$(wrk_run "$nginx_url" "$lua" "$nginx_pid")"; nginx+=("$x") cpu_nginx+=("$c")
	read -r x c <<<"$(wrk_run "$lg_url" "$lua" "$lg_pid")"; lg+=("$x") cpu_lg+=("$c")
	read -r x c <<<"$(wrk_run "$nginx_url$one_id" "" "$nginx_pid")"; nginx1+=("$x") cpu_nginx1+=("$c")
	read -r x c <<<"$(wrk_run "$lg_url$one_id" "" "$lg_pid")"; lg1+=("$x") cpu_lg1+=("$c")
done

rss() { awk -v k="$1:" '$1 == k {print $2}' "/proc/$lg_pid/status"; }
rss_anon=$(rss RssAnon) rss_file=$(rss RssFile) vm_rss=$(rss VmRSS)

step "creates into the 1M-link store: POST /shortenURL, unique URLs"
creates=()
for ((r = 0; r < ROUNDS; r++)); do
	creates+=("$(wrk_rps "${lg_url}shortenURL" scripts/bench/create.lua)")
done
kill "$lg_pid"; wait "$lg_pid" 2>/dev/null || true

step "creates into a fresh store (same pinning)"
lg_port=$(free_port)
GOMAXPROCS=1 taskset -c "$SERVER_CPU" "$work/linkgate" serve --addr "127.0.0.1:$lg_port" \
	--store "bolt:$work/fresh.db" --log-level warn >>"$work/linkgate.log" 2>&1 &
pids+=($!)
wait_tcp 127.0.0.1 "$lg_port" 30 || die "linkgate did not start: $(cat "$work/linkgate.log")"
creates0=()
for ((r = 0; r < ROUNDS; r++)); do
	creates0+=("$(wrk_rps "http://127.0.0.1:$lg_port/shortenURL" scripts/bench/create.lua)")
done

step "results"
report "nginx return 302, random ids (b)" "${nginx[@]}"
report "linkgate GET /{id}, random ids (a)" "${lg[@]}"
echo "  ratio (a)/(b), medians: $(ratio "$(median "${lg[@]}")" "$(median "${nginx[@]}")")"
report "nginx return 302, one id (b1)" "${nginx1[@]}"
report "linkgate GET /{id}, one id (a1)" "${lg1[@]}"
echo "  ratio (a1)/(b1), medians: $(ratio "$(median "${lg1[@]}")" "$(median "${nginx1[@]}")")"
echo "server CPU per request (µs, median of rounds; capacity ratio = nginx/linkgate):"
printf '  random ids: nginx %s, linkgate %s → %s\n' "$(median "${cpu_nginx[@]}")" "$(median "${cpu_lg[@]}")" "$(ratio "$(median "${cpu_nginx[@]}")" "$(median "${cpu_lg[@]}")")"
printf '  one id:     nginx %s, linkgate %s → %s\n' "$(median "${cpu_nginx1[@]}")" "$(median "${cpu_lg1[@]}")" "$(ratio "$(median "${cpu_nginx1[@]}")" "$(median "${cpu_lg1[@]}")")"
report "POST /shortenURL, 1M-link store (c)" "${creates[@]}"
report "POST /shortenURL, fresh store (c0)" "${creates0[@]}"
echo "linkgate memory after the redirect rounds ($N links): RssAnon $((rss_anon / 1024)) MiB, RssFile $((rss_file / 1024)) MiB, VmRSS $((vm_rss / 1024)) MiB"
if grep -qi error "$work/linkgate.log"; then
	echo "linkgate logged errors:" >&2
	cat "$work/linkgate.log" >&2
fi
