#!/usr/bin/env bash
# make bench-dynamodb: linkgate serve over DynamoDB (AWS DynamoDB Local 3.3)
# against the embedded bolt store. Results and their reading:
# docs/dynamodb.md.
#
#  - a hot set of HOT (10,000) random ids, preloaded through the REST API
#    (tools/preload) into a DynamoDB table and into a bolt file;
#  - every server pinned to SERVER_CPU with GOMAXPROCS=1, Debian wrk pinned
#    to LOAD_CPU (as make bench-serve), DynamoDB Local (Java) on LOAD_CPU
#    too but ahead of wrk (nice -10), so the server's core serves only the
#    server and the emulator answers as promptly as the core allows;
#  - (a) GET /{id} over the hot set, --store dynamodb with the read cache
#    (the default), (b) the same over --store bolt (no cache, its default),
#    -c$CONNS; ratio (a)/(b); plus bolt behind the same cache, for scale;
#    the bolt rounds are interleaved, the DynamoDB ones back to back after a
#    10 s warm-up (a hot set is read continuously; see below);
#  - (c) POST /shortenURL, unique URLs, 64 connections, DynamoDB backend:
#    creates/s and p99;
#  - (d) cold reads: GET /{id} with --cache-size 0, every request a
#    DynamoDB GetItem, 64 connections: req/s and p99.
#
# DynamoDB Local listens on every interface; as root the measurement runs
# in a loopback-only network namespace (unshare -n), like the tests.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/bench-lib.sh"
cd "$LINKGATE_ROOT"
export GOTOOLCHAIN=local
HOT=${HOT:-10000}
CREATE_CONNS=${CREATE_CONNS:-64}

if [ "${1:-}" != --inner ]; then
	ddblocal_dir >/dev/null || npm ci --prefix tools/ddblocal --no-audit --no-fund --loglevel=error
	work=$(mktemp -d)
	trap 'rm -rf "$work"' EXIT
	step "build linkgate and preload"
	go build -trimpath -o "$work/linkgate" ./cmd/linkgate
	go build -o "$work/preload" ./tools/preload
	go build -o "$work/benchcmp" ./tools/benchcmp
	export BENCH_WORK=$work
	if [ "$(id -u)" = 0 ] && unshare -n true 2>/dev/null; then
		unshare -n "$0" --inner
	else
		echo "note: cannot create a network namespace; DynamoDB Local listens on all interfaces meanwhile" >&2
		"$0" --inner
	fi
	exit
fi

# --- inside the namespace -------------------------------------------------
ip link set lo up 2>/dev/null || true
work=$BENCH_WORK
benchcmp=$work/benchcmp
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -f "$results_run"; }
trap cleanup EXIT

exec 9>"$BENCH_LOCK"
step "waiting for $BENCH_LOCK"
flock 9
echo "servers on CPU $SERVER_CPU (GOMAXPROCS=1); wrk -t1 -d$DURATION and DynamoDB Local on CPU $LOAD_CPU; $ROUNDS rounds; hot set $HOT ids"

step "start DynamoDB Local"
ddb_port=$(free_port)
pid=$(start_dynamodb_local "$ddb_port" "$work/dynamodb-local.log")
pids+=("$pid")
wait_tcp 127.0.0.1 "$ddb_port" 60 || die "DynamoDB Local did not start: $(cat "$work/dynamodb-local.log")"
# DynamoDB Local stands in for a service with machines of its own: it
# shares LOAD_CPU with wrk but runs ahead of it (nice -10, every thread),
# so a saturated load generator does not slow its answers down.
taskset -a -p -c "$LOAD_CPU" "$pid" >/dev/null
for t in /proc/"$pid"/task/*; do renice -n -10 -p "${t##*/}" >/dev/null 2>&1 || true; done
export AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench AWS_EC2_METADATA_DISABLED=true \
	AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null \
	AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:$ddb_port
"$work/linkgate" dynamodb create-table --table bench >/dev/null

# start_server NAME ARGS... starts linkgate serve pinned to SERVER_CPU and
# sets URL_<NAME> and PID_<NAME>.
start_server() {
	local name=$1 port
	shift
	port=$(free_port)
	GOMAXPROCS=1 taskset -c "$SERVER_CPU" "$work/linkgate" serve --addr "127.0.0.1:$port" \
		--log-level warn "$@" >"$work/$name.log" 2>&1 &
	pids+=("$!")
	printf -v "PID_$name" %s "$!"
	wait_tcp 127.0.0.1 "$port" 30 || die "linkgate ($name) did not start: $(cat "$work/$name.log")"
	printf -v "URL_$name" %s "http://127.0.0.1:$port/"
}
start_server ddb --store dynamodb:bench
start_server bolt --store "bolt:$work/links.db"
start_server boltcache --store "bolt:$work/links-cache.db" --cache-size 100000
start_server cold --store dynamodb:bench --cache-size 0

step "preload the hot set ($HOT ids)"
export IDS_FILE=$work/hot.ids IDS_LIMIT=0
# HOT random 10-character ids (62¹⁰ of them: a repeat is vanishingly rare).
(set +o pipefail; tr -dc 'A-Za-z0-9' </dev/urandom | fold -w 10 | head -n "$HOT") >"$IDS_FILE"
for s in ddb bolt boltcache; do
	url=URL_$s
	taskset -c "$LOAD_CPU" "$work/preload" -url "${!url%/}" -ids "$IDS_FILE" -c 64
done

lua=scripts/bench/redirect.lua
res=$work/results.jsonl
# The bolt rounds are interleaved, after a warm-up (connections, caches;
# not counted). The DynamoDB rounds run back to back after a 10 s warm-up:
# a hot set is read continuously, which is what keeps it in the cache
# (links refresh in the background while they are read); a 20 s pause
# between rounds would let part of it expire and turn the start of each
# round into a burst of DynamoDB reads that no steady hot set sees.
step "redirects over the hot set: bolt and bolt + cache interleaved, then DynamoDB + cache"
measure "$res" -target "bolt $URL_bolt lua=$lua prewarm=3s" -target "boltcache $URL_boltcache lua=$lua prewarm=3s"
measure "$res" -rounds 1 -d 10s -target "ddb_warm $URL_ddb lua=$lua"
before=$(curl -fsS "${URL_ddb}metrics" | awk '/^linkgate_cache_(hits|misses)_total / {printf "%s=%s ", $1, $2}')
measure "$res" -target "ddb $URL_ddb lua=$lua"
rss_kb=$(awk '$1 == "VmRSS:" {print $2}' "/proc/$PID_ddb/status")
cache_metrics=$(curl -fsS "${URL_ddb}metrics" | grep -E '^linkgate_cache_|^linkgate_store_operation_duration_seconds_count\{.*op="get"' || true)

step "creates against DynamoDB Local: POST /shortenURL, $CREATE_CONNS connections"
measure "$res" -c "$CREATE_CONNS" -target "create ${URL_ddb}shortenURL lua=scripts/bench/create.lua"

step "cold reads: GET /{id} with no cache (a DynamoDB GetItem each), $CREATE_CONNS connections"
measure "$res" -c "$CREATE_CONNS" -target "cold $URL_cold lua=$lua prewarm=3s"

step "results"
table "$res" <<'TABLE'
{{report "bolt GET /{id} (b)" "bolt"}}
{{report "DynamoDB + cache GET /{id} (a)" "ddb"}}
ratio (a)/(b), medians: {{printf "%.3f" (div (med "ddb" "rps") (med "bolt" "rps"))}}
{{report "bolt + cache GET /{id}" "boltcache"}}
{{report "DynamoDB POST /shortenURL (c)" "create"}}
{{reportms "DynamoDB POST /shortenURL p99 (c)" "create" "p99"}}
{{report "DynamoDB cold GET /{id} (d)" "cold"}}
{{reportms "DynamoDB cold GET /{id} p99 (d)" "cold" "p99"}}
TABLE
echo "linkgate (DynamoDB + cache) VmRSS after the redirect rounds: $((rss_kb / 1024)) MiB"
echo "its cache counters before the measured DynamoDB rounds (after the warm-up): $before"
echo "its cache and store-read counters after the redirect rounds:"
sed 's/^/  /' <<<"$cache_metrics"
for s in ddb bolt boltcache cold; do
	if grep -qi error "$work/$s.log"; then
		echo "linkgate ($s) logged errors:" >&2
		head -20 "$work/$s.log" >&2
	fi
done
