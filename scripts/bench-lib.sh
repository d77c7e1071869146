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

# wrk_rps URL [LUA] runs wrk once and prints req/s.
wrk_rps() { wrk_out "$@" | awk '/^Requests\/sec:/ {print $2}'; }

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
