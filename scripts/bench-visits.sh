#!/usr/bin/env bash
# make bench-visits: what counting visits costs a redirect. Results and
# their reading: docs/visits.md.
#
#  - two linkgate serve processes over copies of the 1,000,000-link pebble
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
#    server's CPU time per request (tools/benchcmp, from /proc; robust to noise);
#  - (b) fixed rate: FIXED_SHARE (0.6) of the visits-off saturation rate,
#    sent by `linkgate bench -R` (constant rate, latency from each
#    request's intended send time), p99 and ratio on/off. It needs a
#    linkgate with the bench command: this tree's, or LOADGEN=path.
#  - BASE=rev (optional; a revision with the pebble store): a third server,
#    that build with visits on, measured in the same rounds; its
#    throughput, CPU and p99 against this tree's visits-off server.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/bench-lib.sh"
cd "$LINKGATE_ROOT"
export GOTOOLCHAIN=local
N=${N:-1000000}
HOT=${HOT:-10000}
FIXED_SHARE=${FIXED_SHARE:-0.6}
WORKLOADS=${WORKLOADS:-hot all}
BASE=${BASE:-}

bench_workdir # $work, $pids: killed and removed on exit

preloaded_links "$work" "$N" # also builds $benchcmp
[ -z "$BASE" ] || { base_build "$work" "$BASE" && base_links "$work"; }
loadgen=${LOADGEN:-$work/linkgate}
if ! "$loadgen" bench --help >/dev/null 2>&1; then
	echo "note: $loadgen has no bench command (linkgate bench not merged here); set LOADGEN=/path/to/linkgate for the fixed-rate part" >&2
	loadgen=
fi

# start_server NAME ARGS... starts linkgate (BIN, default this tree's) on a
# fresh copy of the store (STORE_DIR, default the cached one); it sets
# server_url and server_pid.
start_server() {
	local name=$1 port; shift
	cp -r "${STORE_DIR:-$links_dir}" "$work/$name"
	port=$(free_port)
	GOMAXPROCS=1 taskset -c "$SERVER_CPU" "${BIN:-$work/linkgate}" serve --addr "127.0.0.1:$port" \
		--store "pebble:$work/$name" --log-level warn "$@" >"$work/$name.log" 2>&1 &
	server_pid=$!
	pids+=("$server_pid")
	wait_tcp 127.0.0.1 "$port" 30 || die "linkgate ($name) did not start: $(cat "$work/$name.log")"
	server_url=http://127.0.0.1:$port/
}

metric() { curl -s "${1}metrics" | awk -v m="$2" '$1 == m {print $2}'; }
rss() { awk '$1 == "RssAnon:" {print int($2/1024)}' "/proc/$1/status"; }

start_server off --visits=false
off=$server_url off_pid=$server_pid
start_server on
on=$server_url on_pid=$server_pid
base_sat=() base_fixed=()
if [ -n "$BASE" ]; then
	BIN=$work/linkgate-base STORE_DIR=$base_links_dir start_server base
	base=$server_url base_pid=$server_pid
	echo "base ($BASE), visits on: $base"
fi
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
	res=$work/$wl.jsonl
	if [ -n "$BASE" ]; then
		base_sat=(-target "base $base lua=scripts/bench/visits.lua pid=$base_pid prewarm=3s")
		base_fixed=(-target "fixed_base $base lua=scripts/bench/visits.lua R=RATE")
	fi
	measure "$res" \
		-target "off $off lua=scripts/bench/visits.lua pid=$off_pid prewarm=3s" \
		-target "on $on lua=scripts/bench/visits.lua pid=$on_pid prewarm=3s" "${base_sat[@]}"
	rate=
	if [ -n "$loadgen" ]; then
		rate=$("$benchcmp" report -t "{{printf \"%.0f\" (mul (med \"off\" \"rps\") $FIXED_SHARE)}}" "$res")
		measure "$res" -gen linkgate -linkgate "$loadgen" -warmup 2s \
			-target "fixed_off $off lua=scripts/bench/visits.lua R=$rate" \
			-target "fixed_on $on lua=scripts/bench/visits.lua R=$rate" "${base_fixed[@]/R=RATE/R=$rate}"
	fi
	flock -u 9
	step "results: workload $wl"
	table "$res" <<TABLE
{{report "saturation, visits off" "off"}}
{{report "saturation, visits on" "on"}}
saturation ratio on/off (medians): {{printf "%.3f" (div (med "on" "rps") (med "off" "rps"))}}   (target ≥ 0.95)
server CPU per request, µs: visits off median {{printf "%.2f" (med "off" "cpu")}} (rounds {{each "%.2f" (vals "off" "cpu")}}), visits on median {{printf "%.2f" (med "on" "cpu")}} (rounds {{each "%.2f" (vals "on" "cpu")}}); ratio off/on {{printf "%.3f" (div (med "off" "cpu") (med "on" "cpu"))}} (the throughput ratio a quiet machine would show)
{{if has "fixed_off" -}}
{{reportms "p99 at $rate req/s, visits off" "fixed_off" "p99"}}
{{reportms "p99 at $rate req/s, visits on" "fixed_on" "p99"}}
p99 ratio on/off (medians): {{printf "%.3f" (div (med "fixed_on" "p99") (med "fixed_off" "p99"))}}   (target ≤ 1.5, issue 27)
{{end -}}
{{if has "base" -}}
base ($BASE), visits on: saturation ratio on/off {{printf "%.3f" (div (med "base" "rps") (med "off" "rps"))}}, CPU ratio off/on {{printf "%.3f" (div (med "off" "cpu") (med "base" "cpu"))}} (median {{printf "%.2f" (med "base" "cpu")}} µs, rounds {{each "%.2f" (vals "base" "cpu")}})
{{end -}}
{{if has "fixed_base" -}}
base ($BASE), visits on: p99 ratio on/off {{printf "%.3f" (div (med "fixed_base" "p99") (med "fixed_off" "p99"))}} (p99 rounds {{each "%.2f" (vals "fixed_base" "p99")}} ms)
{{end -}}
TABLE
	echo "visits on: recorded $(metric "$on" linkgate_visits_recorded_total), flushed $(metric "$on" linkgate_visits_flushed_total) in $(metric "$on" linkgate_visits_flushes_total) batches, dropped $(metric "$on" linkgate_visits_dropped_total), flush errors $(metric "$on" linkgate_visits_flush_errors_total)"
	echo "RssAnon: visits off $(rss "$off_pid") MiB, visits on $(rss "$on_pid") MiB"
done
for f in "$work"/off.log "$work"/on.log; do
	if grep -qi error "$f"; then echo "$(basename "$f") logged errors:" >&2; cat "$f" >&2; fi
done
