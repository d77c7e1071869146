#!/usr/bin/env bash
# make bench-stats: issue 27 §4's statistics figures as a linkgate serve
# process answers them — its RssAnon with N (1,000,000) links after VISITS
# (100,000,000) visits, and the statistics queries through the API.
# Results and their reading: docs/visits.md.
#
#  - the store: tools/benchprep -visits, N links imported with the
#    statistics of VISITS visits over the last DAYS (30) days (a Zipf law
#    over the links; what an import of those visits stores), once, cached
#    in .cache/bench (its days age: remove it to make it again), and
#    checkpointed with this build (an older one is migrated there, minutes
#    at 1M links, not by the server measured);
#  - holding the benchmark lock: linkgate serve on a copy of it, pinned to
#    SERVER_CPU with GOMAXPROCS=1, visits counted; DURATION (20s) of
#    redirects over every link (scripts/bench/visits.lua, Debian wrk pinned
#    to LOAD_CPU), which the visit aggregator counts and flushes;
#  - the queries, each QUERIES (5) times but the one-link query
#    LINK_QUERIES (100) times: all links over the last 30 days by day with
#    the top links, all links over the last 7 days by hour (GET
#    /api/v1/stats), one link over 90 days by day (the busiest link's
#    /api/v1/links/{id}/stats): the wall time of each as curl sees it, and
#    the server's CPU time per query (from /proc, which a loaded machine's
#    waits do not inflate; the aggregator's flushes count too);
#  - RssAnon (and VmRSS) from /proc after the start, the redirects and the
#    queries.
# The run is kept as JSON in docs/results/bench-stats/ (tools/benchcmp).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
duration=${DURATION:-20s} # before bench-lib's default for DURATION
. "$(dirname "$0")/bench-lib.sh"
cd "$LINKGATE_ROOT"
export GOTOOLCHAIN=local
N=${N:-1000000}
VISITS=${VISITS:-100000000}
DAYS=${DAYS:-30}
QUERIES=${QUERIES:-5}
LINK_QUERIES=${LINK_QUERIES:-100}
command -v wrk >/dev/null || die "wrk not installed (apt-get install wrk)"

bench_workdir # $work, $pids: killed and removed on exit
step "build linkgate, benchprep and benchcmp"
go build -trimpath -o "$work/linkgate" ./cmd/linkgate
go build -o "$work/benchprep" ./tools/benchprep
benchcmp_build "$work"
store=$LINKGATE_ROOT/.cache/bench/stats-$N-$VISITS.pebble
export IDS_FILE=$store.ids IDS_LIMIT=0
if [ ! -d "$store" ] || [ ! -f "$IDS_FILE" ]; then
	step "preload $N links with $VISITS visits over $DAYS days (once; cached in $store)"
	mkdir -p "$(dirname "$store")"
	rm -rf "$store" "$IDS_FILE"
	"$work/benchprep" -dir "$store" -ids "$IDS_FILE" -n "$N" -visits "$VISITS" -days "$DAYS"
fi
# A checkpoint (linkgate store backup: the tables hard-linked, not
# copied), opened by this build, which migrates a store cached by an
# older one there, once.
step "copy the cached store with this build (migrates an older one once)"
"$work/linkgate" store backup --store "pebble:$store" "$work/links" >/dev/null

exec 9>"$BENCH_LOCK"
step "waiting for $BENCH_LOCK"
flock 9
step "serve a copy of $(basename "$store") ($(du -sh "$work/links" | cut -f1)), holding $BENCH_LOCK"
key=bench-$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')
port=$(free_port)
GOMAXPROCS=1 taskset -c "$SERVER_CPU" "$work/linkgate" serve --addr "127.0.0.1:$port" \
	--store "pebble:$work/links" --admin-key "$key" --log-level warn >"$work/serve.log" 2>&1 &
pid=$!
pids+=("$pid")
wait_tcp 127.0.0.1 "$port" 120 || die "linkgate did not start: $(cat "$work/serve.log")"
url=http://127.0.0.1:$port
res=$work/stats.jsonl
# record NAME KEY=VALUE… appends a record of figures for benchcmp.
record() {
	local name=$1 values="" kv
	shift
	for kv in "$@"; do values+="${values:+,}\"${kv%%=*}\":${kv#*=}"; done
	printf '{"name":"%s","round":1,"gen":"curl","url":"%s","values":{%s}}\n' "$name" "$url" "$values" >>"$res"
}
mem() { awk -v at="$1" '$1 == "RssAnon:" {a = $2/1024} $1 == "VmRSS:" {v = $2/1024} END {printf "%s_anon=%.1f %s_rss=%.1f", at, a, at, v}' "/proc/$pid/status"; }
memory=$(mem start)

step "redirects over all $N links for $duration, visits counted"
taskset -c "$LOAD_CPU" wrk -t1 -c"$CONNS" -d"$duration" -s scripts/bench/visits.lua "$url/" | tee "$work/wrk.txt" | grep -E 'Requests/sec|requests in|Non-2xx'
memory+=" $(mem redirects)"

day() { date -u -d "$1" +%Y-%m-%d; }
busiest=$(head -1 "$IDS_FILE") # benchprep: the first link created gets the most visits
# cpu: the server's CPU time so far, in ms (user + system).
cpu() { awk -v hz="$(getconf CLK_TCK)" '{printf "%.0f", ($14 + $15) * 1000 / hz}' "/proc/$pid/stat"; }
query() { # NAME TIMES PATH: a record per answer (its wall time), and one of the server's CPU per query
	local i c0 c1 out
	c0=$(cpu)
	for i in $(seq "$2"); do
		out=$(curl -sS -o "$work/answer.json" -w "%{http_code} %{time_total}" -H "Authorization: Bearer $key" "$url$3")
		[ "${out%% *}" = 200 ] || die "$1: answered ${out%% *}: $(head -c 300 "$work/answer.json")"
		! grep -q '"note"' "$work/answer.json" || die "$1: $(grep -o '"note":"[^"]*"' "$work/answer.json")"
		record "$1" "wall=$(awk -v s="${out#* }" 'BEGIN {printf "%.1f", s * 1000}')"
	done
	c1=$(cpu)
	record "$1 cpu" "cpu=$(awk -v d=$((c1 - c0)) -v n="$2" 'BEGIN {printf "%.1f", d / n}')"
}
step "queries"
query "all links, 30 days by day" "$QUERIES" "/api/v1/stats?from=$(day '30 days ago')&to=$(day tomorrow)&granularity=day"
query "all links, 7 days by hour" "$QUERIES" "/api/v1/stats?from=$(date -u -d '-167 hours' +%Y-%m-%dT%H:00:00Z)&granularity=hour"
query "one link, 90 days by day" "$LINK_QUERIES" "/api/v1/links/$busiest/stats?from=$(day '89 days ago')&to=$(day tomorrow)&granularity=day"
memory+=" $(mem queries)"
metric() { curl -s "$url/metrics" | awk -v m="$1" '$1 == m {printf "%.0f", $2}'; }
record redirects "rps=$(awk '/Requests\/sec/ {print $2}' "$work/wrk.txt")" "recorded=$(metric linkgate_visits_recorded_total)" \
	"flushed=$(metric linkgate_visits_flushed_total)" "dropped=$(metric linkgate_visits_dropped_total)"
# shellcheck disable=SC2086 # word splitting wanted: KEY=VALUE pairs
record memory $memory
kill "$pid"
wait "$pid" 2>/dev/null || true
if grep -qi error "$work/serve.log"; then
	echo "the server logged errors:" >&2
	cat "$work/serve.log" >&2
fi
flock -u 9

table "$res" <<'TABLE'
| figure | measured | issue 27's target |
|---|---|---|
| RssAnon after the start / the redirects / the queries | {{printf "%.0f" (med "memory" "start_anon")}} / {{printf "%.0f" (med "memory" "redirects_anon")}} / {{printf "%.0f" (med "memory" "queries_anon")}} MiB (VmRSS {{printf "%.0f" (med "memory" "start_rss")}} / {{printf "%.0f" (med "memory" "redirects_rss")}} / {{printf "%.0f" (med "memory" "queries_rss")}} MiB: the rest is the store's mapped files) | ≤ 200 MiB |
{{- range list "all links, 30 days by day" "all links, 7 days by hour" "one link, 90 days by day"}}
| {{.}} ({{len (vals . "wall")}} queries) | server CPU {{printf "%.1f" (med (printf "%s cpu" .) "cpu")}} ms a query; wall median {{printf "%.1f" (median (vals . "wall"))}} ms, {{rng "%.1f" (vals . "wall")}} ms | {{if eq . "one link, 90 days by day"}}p99 ≤ 10 ms{{else if eq . "all links, 30 days by day"}}≤ 1 s{{else}}—{{end}} |
{{- end}}

Before the queries, {{printf "%.0f" (med "redirects" "rps")}} redirects/s over every link: {{printf "%.0f" (med "redirects" "recorded")}} visits counted, {{printf "%.0f" (med "redirects" "flushed")}} flushed, {{printf "%.0f" (med "redirects" "dropped")}} dropped.
TABLE
