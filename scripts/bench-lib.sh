# Shared helpers for the make bench-* scripts. Source it after lib.sh.
#
# CPU layout on the 2-core reference machine: the server under test (and
# nginx, the ceiling) on SERVER_CPU, the load generator on LOAD_CPU.
SERVER_CPU=${SERVER_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10s}
CONNS=${CONNS:-50}
BENCH_LOCK=${BENCH_LOCK:-/tmp/linkgate-bench.lock}

# bench_workdir makes a temporary $work directory and an empty $pids list;
# on exit every PID in $pids is killed and $work removed.
bench_workdir() {
	work=$(mktemp -d)
	pids=()
	trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"' EXIT
}

# start_nginx_302 DIR PORT starts nginx 1 worker answering every request
# with `return 302`, pinned to SERVER_CPU, and prints its master PID.
start_nginx_302() {
	local dir=$1 port=$2
	mkdir -p "$dir/logs"
	cat >"$dir/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $dir/nginx.pid;
error_log $dir/logs/error.log warn;
events { worker_connections 4096; }
http {
	access_log off;
	client_body_temp_path $dir/tmp_body;
	proxy_temp_path $dir/tmp_proxy;
	fastcgi_temp_path $dir/tmp_fastcgi;
	uwsgi_temp_path $dir/tmp_uwsgi;
	scgi_temp_path $dir/tmp_scgi;
	keepalive_requests 1000000;
	server {
		listen 127.0.0.1:$port;
		location / { return 302 https://aws.amazon.com/ec2/graviton/; }
	}
}
CONF
	taskset -c "$SERVER_CPU" nginx -p "$dir" -c "$dir/nginx.conf" >"$dir/logs/stdout.log" 2>&1 &
	echo $!
}

# wrk_out URL [LUA] runs wrk once with --latency, pinned to LOAD_CPU, and
# prints its report. Non-2xx/3xx answers are reported on stderr (they
# would make a run lie).
wrk_out() {
	local url=$1 lua=${2:-} out
	local args=(-t1 -c"$CONNS" -d"$DURATION" --latency)
	[ -n "$lua" ] && args+=(-s "$lua")
	out=$(taskset -c "$LOAD_CPU" wrk "${args[@]}" "$url")
	if grep -q "Non-2xx or 3xx" <<<"$out"; then
		echo "warning: $(grep 'Non-2xx or 3xx' <<<"$out") for $url" >&2
	fi
	echo "$out"
}

# wrk_rps URL [LUA] runs wrk once, pinned to LOAD_CPU, and prints req/s.
wrk_rps() { wrk_run "$1" "${2:-}" | cut -d' ' -f1; }

# wrk_run URL LUA [PID] runs wrk once and prints "req/s cpu": cpu is the
# CPU time process PID (and its children, e.g. nginx's worker) spent per
# request, in µs — a figure a noisy machine disturbs far less than req/s,
# since time stolen by other processes is not counted. "-" without a PID.
wrk_run() {
	local url=$1 lua=${2:-} pid=${3:-} out before after reqs
	[ -n "$pid" ] && before=$(cpu_ticks "$pid")
	out=$(wrk_out "$url" "$lua")
	[ -n "$pid" ] && after=$(cpu_ticks "$pid")
	reqs=$(awk '/requests in/ {print $1}' <<<"$out")
	if [ -n "$pid" ] && [ "${reqs:-0}" -gt 0 ]; then
		awk -v rps="$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")" -v t=$((after - before)) -v hz="$(getconf CLK_TCK)" -v n="$reqs" \
			'BEGIN {printf "%s %.2f\n", rps, t / hz * 1e6 / n}'
	else
		echo "$(awk '/^Requests\/sec:/ {print $2}' <<<"$out") -"
	fi
}

# wrk_stats URL [LUA] runs wrk once and prints "req/s p99-in-ms".
wrk_stats() {
	wrk_out "$@" | awk '
		function ms(v) {
			if (v ~ /us$/) return substr(v, 1, length(v) - 2) / 1000
			if (v ~ /ms$/) return substr(v, 1, length(v) - 2) + 0
			if (v ~ /m$/) return substr(v, 1, length(v) - 1) * 60000
			if (v ~ /s$/) return substr(v, 1, length(v) - 1) * 1000
			return v
		}
		/^Requests\/sec:/ {rps = $2}
		$1 == "99%" {p99 = ms($2)}
		END {printf "%s %.2f\n", rps, p99}'
}

# cpu_ticks PID prints the user+system clock ticks of PID and its children.
cpu_ticks() {
	local p total=0
	for p in "$1" $(pgrep -P "$1" 2>/dev/null); do
		total=$((total + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0)))
	done
	echo "$total"
}

# rounds URL [LUA] runs wrk ROUNDS times and prints the req/s of each, space-separated.
rounds() {
	local i res=()
	for ((i = 0; i < ROUNDS; i++)); do res+=("$(wrk_rps "$@")"); done
	echo "${res[*]}"
}

# median prints the median of its arguments; range prints "min–max".
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
range() { printf '%s\n' "$@" | sort -g | awk 'NR==1{lo=$1} {hi=$1} END {printf "%.0f–%.0f", lo, hi}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", a/b}'; }

# report NAME VALUES... prints one result line: median, range, every round.
report() {
	local name=$1; shift
	printf '%-34s median %10.0f req/s  range %s  rounds: %s\n' "$name" "$(median "$@")" "$(range "$@")" "$*"
}

# report_ms NAME VALUES... prints one latency line: median, range, rounds.
report_ms() {
	local name=$1; shift
	printf '%-34s median %10.2f ms     range %s  rounds: %s\n' "$name" "$(median "$@")" \
		"$(printf '%s\n' "$@" | sort -g | awk 'NR==1{lo=$1} {hi=$1} END {printf "%.2f–%.2f", lo, hi}')" "$*"
}

# preloaded_links WORK N builds this tree's linkgate into WORK/linkgate and
# makes sure a bolt store of N preloaded links and its shuffled id list
# exist in .cache/bench (tools/benchprep, once; make bench-serve and make
# bench-visits share them). It sets links_db and IDS_FILE (exported, for
# scripts/bench/redirect.lua).
preloaded_links() {
	local work=$1 n=$2 cache=$LINKGATE_ROOT/.cache/bench
	step "build linkgate and benchprep"
	go build -trimpath -o "$work/linkgate" ./cmd/linkgate
	go build -o "$work/benchprep" ./tools/benchprep
	mkdir -p "$cache"
	links_db=$cache/links-$n.db
	export IDS_FILE=$cache/links-$n.ids
	if [ ! -f "$links_db" ] || [ ! -f "$IDS_FILE" ]; then
		step "preload $n links (once; cached in $cache)"
		rm -f "$links_db" "$IDS_FILE"
		"$work/benchprep" -db "$links_db" -ids "$IDS_FILE" -n "$n"
	fi
}
