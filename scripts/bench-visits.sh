#!/usr/bin/env bash
# make bench-visits: what counting visits costs a redirect. Results and
# their reading: docs/visits.md.
#
#  - two linkgate serve processes over copies of the 1,000,000-link bolt
#    store of make bench-serve, one with visits counted (the default) and
#    one with --visits=false, both pinned to SERVER_CPU with GOMAXPROCS=1;
#    the load generator pinned to LOAD_CPU; rounds interleaved off/on;
#  - every request carries a browser User-Agent and a Referer
#    (scripts/bench/visits.lua), so each one is classified and counted;
#  - two workloads: "hot", the HOT (10,000) first ids of the shuffled id
#    list — most traffic goes to few links, as in real use — and "all",
#    every preloaded id once per pass, the worst case for aggregation (each
#    request a link not yet pending, every flush touching up to ~100k links);
#  - (a) saturation: Debian wrk -t1 -c$CONNS, req/s, ratio on/off, and the
#    server's CPU time per request (bench-lib.sh wrk_run; robust to noise);
#  - (b) fixed rate: FIXED_SHARE (0.6) of the visits-off saturation rate,
#    sent by `linkgate bench -R` (constant rate, latency from each
#    request's intended send time), p99 and ratio on/off. It needs a
#    linkgate with the bench command: this tree's, or LOADGEN=path.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/bench-lib.sh"
cd "$LINKGATE_ROOT"
export GOTOOLCHAIN=local
N=${N:-1000000}
HOT=${HOT:-10000}
FIXED_SHARE=${FIXED_SHARE:-0.6}
WORKLOADS=${WORKLOADS:-hot all}

bench_workdir # $work, $pids: killed and removed on exit

preloaded_links "$work" "$N"
loadgen=${LOADGEN:-$work/linkgate}
if ! "$loadgen" bench --help >/dev/null 2>&1; then
	echo "note: $loadgen has no bench command (linkgate bench not merged here); set LOADGEN=/path/to/linkgate for the fixed-rate part" >&2
	loadgen=
fi

# start_server NAME ARGS... starts linkgate on a fresh copy of the store;
# it sets server_url and server_pid.
start_server() {
	local name=$1 port; shift
	cp "$links_db" "$work/$name.db"
	port=$(free_port)
	GOMAXPROCS=1 taskset -c "$SERVER_CPU" "$work/linkgate" serve --addr "127.0.0.1:$port" \
		--store "bolt:$work/$name.db" --log-level warn "$@" >"$work/$name.log" 2>&1 &
	server_pid=$!
	pids+=("$server_pid")
	wait_tcp 127.0.0.1 "$port" 30 || die "linkgate ($name) did not start: $(cat "$work/$name.log")"
	server_url=http://127.0.0.1:$port/
}

# fixed_p99 URL RATE runs linkgate bench at RATE and prints its p99 in ms.
fixed_p99() {
	local json=$work/fixed.json
	taskset -c "$LOAD_CPU" "$loadgen" bench -t1 -c"$CONNS" -R"$2" -d"$DURATION" --warmup 2s \
		-s scripts/bench/visits.lua --json "$json" "$1" >"$work/fixed.txt" 2>&1 || { cat "$work/fixed.txt" >&2; die "linkgate bench failed"; }
	python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); e=r["errors_total"]; print(r["latency"]["percentiles_ms"]["99"]); e and print("warning: %d errors" % e, file=sys.stderr)' "$json"
}

metric() { curl -s "${1}metrics" | awk -v m="$2" '$1 == m {print $2}'; }
rss() { awk '$1 == "RssAnon:" {print int($2/1024)}' "/proc/$1/status"; }

start_server off --visits=false
off=$server_url off_pid=$server_pid
start_server on
on=$server_url on_pid=$server_pid
echo "servers on CPU $SERVER_CPU (GOMAXPROCS=1); load on CPU $LOAD_CPU; -c$CONNS -d$DURATION; $ROUNDS rounds; $N preloaded links"
echo "visits off: $off   visits on: $on"

exec 9>"$BENCH_LOCK"
for wl in $WORKLOADS; do
	case $wl in
	hot) export IDS_LIMIT=$HOT ;;
	all) export IDS_LIMIT=0 ;;
	*) die "unknown workload $wl (hot, all)" ;;
	esac
	step "workload $wl (IDS_LIMIT=$IDS_LIMIT): waiting for $BENCH_LOCK"
	flock 9
	DURATION=3s wrk_rps "$off" scripts/bench/visits.lua >/dev/null
	DURATION=3s wrk_rps "$on" scripts/bench/visits.lua >/dev/null
	sat_off=() sat_on=() cpu_off=() cpu_on=()
	for ((r = 0; r < ROUNDS; r++)); do
		read -r x c <<<"$(wrk_run "$off" scripts/bench/visits.lua "$off_pid")"; sat_off+=("$x") cpu_off+=("$c")
		read -r x c <<<"$(wrk_run "$on" scripts/bench/visits.lua "$on_pid")"; sat_on+=("$x") cpu_on+=("$c")
	done
	p99_off=() p99_on=()
	rate=
	if [ -n "$loadgen" ]; then
		rate=$(awk -v m="$(median "${sat_off[@]}")" -v s="$FIXED_SHARE" 'BEGIN {printf "%d", m * s}')
		for ((r = 0; r < ROUNDS; r++)); do
			p99_off+=("$(fixed_p99 "$off" "$rate")")
			p99_on+=("$(fixed_p99 "$on" "$rate")")
		done
	fi
	flock -u 9
	step "results: workload $wl"
	report "saturation, visits off" "${sat_off[@]}"
	report "saturation, visits on" "${sat_on[@]}"
	echo "saturation ratio on/off (medians): $(ratio "$(median "${sat_on[@]}")" "$(median "${sat_off[@]}")")   (target ≥ 0.95)"
	echo "server CPU per request, µs: visits off median $(median "${cpu_off[@]}") (rounds ${cpu_off[*]}), visits on median $(median "${cpu_on[@]}") (rounds ${cpu_on[*]}); ratio off/on $(ratio "$(median "${cpu_off[@]}")" "$(median "${cpu_on[@]}")") (the throughput ratio a quiet machine would show)"
	if [ -n "$rate" ]; then
		report_ms "p99 at $rate req/s, visits off" "${p99_off[@]}"
		report_ms "p99 at $rate req/s, visits on" "${p99_on[@]}"
		echo "p99 ratio on/off (medians): $(ratio "$(median "${p99_on[@]}")" "$(median "${p99_off[@]}")")   (target ≤ 1.05)"
	fi
	echo "visits on: recorded $(metric "$on" linkgate_visits_recorded_total), flushed $(metric "$on" linkgate_visits_flushed_total) in $(metric "$on" linkgate_visits_flushes_total) batches, dropped $(metric "$on" linkgate_visits_dropped_total), flush errors $(metric "$on" linkgate_visits_flush_errors_total)"
	echo "RssAnon: visits off $(rss "$off_pid") MiB, visits on $(rss "$on_pid") MiB"
done
for f in "$work"/off.log "$work"/on.log; do
	if grep -qi error "$f"; then echo "$(basename "$f") logged errors:" >&2; cat "$f" >&2; fi
done
