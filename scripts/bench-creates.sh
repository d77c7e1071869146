#!/usr/bin/env bash
# make bench-creates: durable creates (POST /shortenURL, a unique URL per
# request) of linkgate serve, this tree against a base
# build (BASE, a git revision; default 096063f, the last bbolt release) in the same run, rounds
# interleaved. Results and their reading: docs/serve-benchmarks.md.
#
#  - STORE=1m (default): a copy of the 1,000,000-link store of make
#    bench-serve, fresh for each server; STORE=fresh: an empty store;
#  - each server pinned to SERVER_CPU with GOMAXPROCS=1 (SERVER_PROCS to
#    change it, SERVER_CPUS for the taskset list), Debian wrk pinned to
#    LOAD_CPU: -t1 -c50 -d10s, ROUNDS (3) rounds each, medians;
#  - per round: creates/s and the server's CPU time per create (µs, from
#    /proc: robust to other processes on a shared machine); at the end
#    the ratio this tree / base of both medians.
#  - BOTH=1 (default; 0 to skip): both builds again on fresh stores,
#    unpinned on both cores (GOMAXPROCS unset), and `linkgate bench
#    capacity --compare --scenario shorten --slo p99.9=70ms`: the highest
#    constant rate of durable creates whose p99.9 stays within 70 ms
#    (steps alternate between the builds; the generator shares the cores),
#    and the ratio this tree / base.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/bench-lib.sh"
cd "$LINKGATE_ROOT"
export GOTOOLCHAIN=local
BASE=${BASE:-096063f} # the last release on the bbolt store
STORE=${STORE:-1m}
SERVER_PROCS=${SERVER_PROCS:-1}
SERVER_CPUS=${SERVER_CPUS:-$SERVER_CPU}
BOTH=${BOTH:-1}

bench_workdir # $work, $pids: killed and removed on exit

preloaded_links "$work" 1000000
mv "$work/linkgate" "$work/linkgate-new"
base_build "$work" "$BASE"
(cd "$work/base-src" && go build -o "$work/benchprep-base" ./tools/benchprep)
# A base from before the pebble store keeps links in a bbolt file: its own
# benchprep makes its 1M-link store (cached per base).
if [ -d "$work/base-src/shortener/pebble" ]; then
	base_store=$links_dir base_kind=pebble
else
	base_store=$LINKGATE_ROOT/.cache/bench/links-1000000-$(git rev-parse --short "$BASE").db base_kind=bolt
	if [ "$STORE" = 1m ] && [ ! -f "$base_store" ]; then
		step "preload 1000000 links for the base (once)"
		"$work/benchprep-base" -db "$base_store" -ids "$work/base.ids" -n 1000000
	fi
fi

# start NAME [CPUS PROCS] starts build NAME on a fresh store, pinned to
# CPUS with GOMAXPROCS=PROCS (default SERVER_CPUS, SERVER_PROCS; "all" and
# "": unpinned), and prints its PID and port.
start() {
	local name=$1 cpus=${2:-$SERVER_CPUS} procs=${3-$SERVER_PROCS} port dir=$work/$1
	rm -rf "$dir" && mkdir "$dir"
	local kind=pebble src=$links_dir
	[ "$name" = base ] && kind=$base_kind src=$base_store
	local store=$dir/links
	[ "$kind" = bolt ] && store=$dir/links.db
	[ "$STORE" = 1m ] && cp -r "$src" "$store"
	port=$(free_port)
	local pin=(taskset -c "$cpus")
	[ "$cpus" = all ] && pin=()
	env ${procs:+GOMAXPROCS=$procs} "${pin[@]}" "$work/linkgate-$name" serve --addr "127.0.0.1:$port" \
		--store "$kind:$store" --log-level warn >"$dir/log" 2>&1 &
	wait_tcp 127.0.0.1 "$port" 30 || die "linkgate-$name did not start: $(cat "$dir/log")"
	echo "$! $port"
}

exec 9>"$BENCH_LOCK"
step "waiting for $BENCH_LOCK"
flock 9
echo "server on CPU $SERVER_CPUS (GOMAXPROCS=$SERVER_PROCS); wrk -t1 -c$CONNS -d$DURATION on CPU $LOAD_CPU; $ROUNDS rounds; store: $STORE"
read -r base_pid base_port <<<"$(start base)"
pids+=("$base_pid")
read -r new_pid new_port <<<"$(start new)"
pids+=("$new_pid")

step "creates: base ($BASE) and this tree, rounds interleaved"
res=$work/results.jsonl
measure "$res" \
	-target "base http://127.0.0.1:$base_port/shortenURL lua=scripts/bench/create.lua pid=$base_pid" \
	-target "new http://127.0.0.1:$new_port/shortenURL lua=scripts/bench/create.lua pid=$new_pid"
# Stop both (the new build checkpoints its log on the way out) before the
# lock is released.
kill "$base_pid" "$new_pid"
wait "$base_pid" "$new_pid" 2>/dev/null || true

if [ "$BOTH" = 1 ]; then
	step "creates on both cores, unpinned: capacity at p99.9 ≤ 70 ms, base (A) and this tree (B), steps alternating"
	read -r base_pid base_port <<<"$(start base all "")"
	pids+=("$base_pid")
	read -r new_pid new_port <<<"$(start new all "")"
	pids+=("$new_pid")
	"$work/linkgate-new" bench capacity --compare --scenario shorten --slo p99.9=70ms \
		--min "${BOTH_MIN:-2000}" --step-duration "${BOTH_STEP:-5s}" --html "" \
		"http://127.0.0.1:$base_port" "http://127.0.0.1:$new_port" | tee "$work/both.txt"
	kill "$base_pid" "$new_pid"
	wait "$base_pid" "$new_pid" 2>/dev/null || true
fi

step "results"
table "$res" <<TABLE
{{report "base ($BASE)" "base"}}
{{report "this tree" "new"}}
  ratio this tree / base, medians: {{printf "%.3f" (div (med "new" "rps") (med "base" "rps"))}}
server CPU per create (µs, median; range): base {{printf "%.2f" (med "base" "cpu")}} ({{sorted "%.2f" (vals "base" "cpu")}}), this tree {{printf "%.2f" (med "new" "cpu")}} ({{sorted "%.2f" (vals "new" "cpu")}})
p99 (ms, median; range): base {{printf "%.1f" (med "base" "p99")}} ({{sorted "%.1f" (vals "base" "p99")}}), this tree {{printf "%.1f" (med "new" "p99")}} ({{sorted "%.1f" (vals "new" "p99")}})
TABLE
if [ -f "$work/both.txt" ]; then
	echo "both cores, unpinned, capacity at p99.9 ≤ 70 ms (A: base, B: this tree):"
	tail -n 3 "$work/both.txt"
fi
for n in base new; do
	if grep -qi error "$work/$n/log"; then
		echo "linkgate-$n logged errors:" >&2
		cat "$work/$n/log" >&2
	fi
done
