#!/usr/bin/env bash
# scripts/bench-stats-rss.sh: issue 27 §4's memory figure, RssAnon of a
# linkgate serve process with N (1,000,000) links after VISITS
# (100,000,000) visits, and the statistics queries as that server answers
# them. Results and their reading: docs/visits.md.
#
#  - the store: tools/benchprep -visits, N links imported with the
#    statistics of VISITS visits over the last DAYS (30) days (a Zipf law
#    over the links; what an import of those visits stores), once, cached
#    in .cache/bench (its days age: remove it to make it again);
#  - linkgate serve on a copy of it, pinned to SERVER_CPU with
#    GOMAXPROCS=1, visits counted; DURATION of redirects over every link
#    (scripts/bench/visits.lua, Debian wrk pinned to LOAD_CPU), which the
#    visit aggregator counts and flushes into the store;
#  - QUERIES (5) times all links over the last 30 days with the top links
#    (GET /api/v1/stats), LINK_QUERIES (100) times one link over 90 days
#    by day (the busiest link's /api/v1/links/{id}/stats): their time as
#    curl sees it, and the server's CPU time per query (from /proc, which
#    a loaded machine's waits do not inflate; the aggregator's flushes
#    count too);
#  - RssAnon (and VmRSS) from /proc after the start, the redirects and the
#    queries.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$LINKGATE_ROOT"
export GOTOOLCHAIN=local
N=${N:-1000000}
VISITS=${VISITS:-100000000}
DAYS=${DAYS:-30}
DURATION=${DURATION:-20s}
CONNS=${CONNS:-50}
QUERIES=${QUERIES:-5}
LINK_QUERIES=${LINK_QUERIES:-100}
SERVER_CPU=${SERVER_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
command -v wrk >/dev/null || die "wrk not installed (apt-get install wrk)"

work=$(mktemp -d)
pid=
trap '[ -z "$pid" ] || kill "$pid" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT

step "build linkgate and benchprep"
go build -trimpath -o "$work/linkgate" ./cmd/linkgate
go build -o "$work/benchprep" ./tools/benchprep
store=$LINKGATE_ROOT/.cache/bench/stats-$N-$VISITS.pebble
export IDS_FILE=$store.ids IDS_LIMIT=0
if [ ! -d "$store" ] || [ ! -f "$IDS_FILE" ]; then
	step "preload $N links with $VISITS visits over $DAYS days (once; cached in $store)"
	mkdir -p "$(dirname "$store")"
	rm -rf "$store" "$IDS_FILE"
	"$work/benchprep" -dir "$store" -ids "$IDS_FILE" -n "$N" -visits "$VISITS" -days "$DAYS"
fi
# A store cached by an older build is migrated once, here, as in
# preloaded_links (bench-lib.sh), not by the server the figures are of.
step "open the cached store with this build (migrates an older one once)"
"$work/linkgate" links list --store "pebble:$store" --limit 1 >/dev/null

step "serve a copy of $(basename "$store") ($(du -sh "$store" | cut -f1))"
cp -r "$store" "$work/links"
key=bench-$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')
port=$(free_port)
GOMAXPROCS=1 taskset -c "$SERVER_CPU" "$work/linkgate" serve --addr "127.0.0.1:$port" \
	--store "pebble:$work/links" --admin-key "$key" --log-level warn >"$work/serve.log" 2>&1 &
pid=$!
wait_tcp 127.0.0.1 "$port" 300 || die "linkgate did not start: $(cat "$work/serve.log")"
url=http://127.0.0.1:$port
mem() { awk '$1 == "RssAnon:" {a = int($2/1024)} $1 == "VmRSS:" {v = int($2/1024)} END {printf "RssAnon %d MiB, VmRSS %d MiB", a, v}' "/proc/$pid/status"; }
echo "after the start: $(mem)"

step "redirects over all $N links for $DURATION, visits counted"
taskset -c "$LOAD_CPU" wrk -t1 -c"$CONNS" -d"$DURATION" -s scripts/bench/visits.lua "$url/" | grep -E 'Requests/sec|requests in|Non-2xx'
echo "after the redirects: $(mem)"

day() { date -u -d "$1" +%Y-%m-%d; }
busiest=$(head -1 "$IDS_FILE") # benchprep: the first link created gets the most visits
# cpu: the server's CPU time so far, in clock ticks (user + system).
cpu() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
query() { # NAME TIMES PATH: the answers' times as curl sees them, and the server's CPU per query
	local i c0 c1
	c0=$(cpu)
	for i in $(seq "$2"); do
		curl -sS -o "$work/answer.json" -w "%{http_code} %{time_total}\n" -H "Authorization: Bearer $key" "$url$3"
	done | sort -k2 -n | awk -v name="$1" '$1 != 200 {bad++} {t[NR] = $2} END {
		printf "%s: %d queries, %d not 200, wall min %.3f s, median %.3f s, max %.3f s\n", name, NR, bad, t[1], t[int((NR + 1) / 2)], t[NR]}'
	c1=$(cpu)
	echo "  server CPU per query: $(awk -v d=$((c1 - c0)) -v n="$2" -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "%.1f ms", d * 1000 / hz / n}')"
}
step "queries"
query "all links, 30 days by day, top links" "$QUERIES" "/api/v1/stats?from=$(day '30 days ago')&to=$(day tomorrow)&granularity=day"
head -c 300 "$work/answer.json"
echo
query "one link, 90 days by day" "$LINK_QUERIES" "/api/v1/links/$busiest/stats?from=$(day '89 days ago')&to=$(day tomorrow)&granularity=day"
echo "after the queries: $(mem)"
curl -s "$url/metrics" | grep -E '^linkgate_visits_(recorded|flushed|dropped)_total' || true
if grep -qi error "$work/serve.log"; then
	echo "the server logged errors:" >&2
	cat "$work/serve.log" >&2
fi
