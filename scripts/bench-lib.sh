# Shared helpers for the make bench-* scripts. Source it after lib.sh.
#
# The run is kept as data: see results_begin and publish_table (lib.sh).
results_begin "$(basename "$0" .sh)"
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
	trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work" "$results_run"' EXIT
}

# start_nginx_302 DIR PORT [CERT_DIR TLS_PORT H2_PORT] starts nginx 1
# worker answering every request with `return 302`, pinned to SERVER_CPU,
# and prints its master PID. With CERT_DIR (`benchcmp cert`), it also
# answers over TLS on TLS_PORT (`ssl`) and HTTP/2 on H2_PORT (`ssl http2`),
# set up like linkgate's TLS (nginx_tls).
start_nginx_302() {
	local dir=$1 port=$2 tls=""
	mkdir -p "$dir/logs"
	if [ -n "${3:-}" ]; then
		# nginx ends a connection after 1000 requests by default (HTTP/2
		# too, where h2load does not reconnect); linkgate does not.
		tls="$(nginx_tls "$3")
	server {
		keepalive_requests 100000000;
		listen 127.0.0.1:$4 ssl;
		listen 127.0.0.1:$5 ssl http2;
		location / { return 302 https://aws.amazon.com/ec2/graviton/; }
	}"
	fi
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
$tls
}
CONF
	taskset -c "$SERVER_CPU" nginx -p "$dir" -c "$dir/nginx.conf" >"$dir/logs/stdout.log" 2>&1 &
	echo $!
}

# start_nginx_map DIR PORT IDS starts nginx (1 worker, pinned like
# start_nginx_302) redirecting every id of the file IDS through a `map` to
# its own ~60-byte URL (404 for any other path) and writing each visit —
# time, path, status, referrer, User-Agent, address — to a buffered
# access_log: the lookup and a record of the visit, what linkgate does
# with visits on (issue 27's anchor). It prints the master PID.
start_nginx_map() {
	local dir=$1 port=$2 ids=$3
	mkdir -p "$dir/logs"
	awk '{printf "/%s \"https://www.example.com/articles/2026/%07d/a-typical-path?utm_source=x\";\n", $1, NR}' "$ids" >"$dir/ids.map"
	cat >"$dir/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $dir/nginx.pid;
error_log $dir/logs/error.log warn;
events { worker_connections 4096; }
http {
	client_body_temp_path $dir/tmp_body;
	proxy_temp_path $dir/tmp_proxy;
	fastcgi_temp_path $dir/tmp_fastcgi;
	uwsgi_temp_path $dir/tmp_uwsgi;
	scgi_temp_path $dir/tmp_scgi;
	keepalive_requests 1000000;
	map_hash_max_size $(($(wc -l <"$ids") * 2 + 1024));
	map_hash_bucket_size 256;
	map \$uri \$target { default ""; include $dir/ids.map; }
	log_format visit '\$msec \$uri \$status "\$http_referer" "\$http_user_agent" \$remote_addr';
	access_log $dir/logs/access.log visit buffer=64k flush=1s;
	server {
		listen 127.0.0.1:$port;
		location / {
			if (\$target = "") { return 404; }
			return 302 \$target;
		}
	}
}
CONF
	taskset -c "$SERVER_CPU" nginx -p "$dir" -c "$dir/nginx.conf" >"$dir/logs/stdout.log" 2>&1 &
	echo $!
}

# benchcmp_build WORK builds tools/benchcmp (the statistics: interleaved
# rounds, CPU per request from /proc, medians, ranges, ratios, tables) into
# WORK/benchcmp and sets $benchcmp.
benchcmp_build() {
	go build -o "$1/benchcmp" ./tools/benchcmp
	benchcmp=$1/benchcmp
}

# measure RESULTS [benchcmp run flags…] runs interleaved rounds of the
# generator (Debian wrk by default) pinned to LOAD_CPU — ROUNDS rounds of
# -t1 -c$CONNS -d$DURATION unless the flags say otherwise — and appends the
# figures to RESULTS. See tools/benchcmp for -target.
measure() {
	local res=$1
	shift
	command -v wrk >/dev/null || die "wrk not installed (apt-get install wrk): make bench-* load with Debian's wrk"
	"$benchcmp" run -o "$res" -cpu "$LOAD_CPU" -rounds "$ROUNDS" -d "$DURATION" -c "$CONNS" "$@"
}

# base_build WORK REV builds linkgate at git revision REV into
# WORK/linkgate-base (its source in WORK/base-src).
base_build() {
	step "build the base ($2)"
	mkdir "$1/base-src"
	git archive "$2" | tar -x -C "$1/base-src"
	(cd "$1/base-src" && go build -trimpath -o "$1/linkgate-base" ./cmd/linkgate)
}

# base_links WORK, after preloaded_links and base_build, brings the base's
# copy of the cached store to the base's format once; base servers start on
# copies of base_links_dir.
base_links() {
	step "open the base's copy of the cached store with the base"
	"$1/linkgate-base" links list --store "pebble:$base_links_dir" --limit 1 >/dev/null ||
		die "the base cannot open $base_links_dir (cached after a newer build migrated the store?): remove it and $links_dir to prepare both again"
}

# table RESULTS… prints the table whose template is on stdin and keeps it
# with the run's records in docs/results (publish_table).
table() { publish_table "$benchcmp" "$@"; }

# preloaded_links WORK N builds this tree's linkgate into WORK/linkgate and
# makes sure a pebble store of N preloaded links and its shuffled id list
# exist in .cache/bench (tools/benchprep, once; make bench-serve and make
# bench-visits share them). It sets links_dir (copy it with cp -r) and
# IDS_FILE (exported, for scripts/bench/redirect.lua).
preloaded_links() {
	local work=$1 n=$2 cache=$LINKGATE_ROOT/.cache/bench
	step "build linkgate, benchprep and benchcmp"
	go build -trimpath -o "$work/linkgate" ./cmd/linkgate
	go build -o "$work/benchprep" ./tools/benchprep
	benchcmp_build "$work"
	mkdir -p "$cache"
	links_dir=$cache/links-$n.pebble
	export IDS_FILE=$cache/links-$n.pebble.ids
	if [ ! -d "$links_dir" ] || [ ! -f "$IDS_FILE" ]; then
		step "preload $n links (once; cached in $cache)"
		rm -rf "$links_dir" "$IDS_FILE"
		# With BASE set, the base's benchprep writes the cache: a store in the
		# base's format, which the base can open and this build migrates.
		local prep=$work/benchprep
		if [ -n "${BASE:-}" ]; then
			mkdir "$work/prep-src"
			git archive "$BASE" | tar -x -C "$work/prep-src"
			(cd "$work/prep-src" && go build -o "$work/benchprep-base" ./tools/benchprep)
			prep=$work/benchprep-base
		fi
		"$prep" -dir "$links_dir" -ids "$IDS_FILE" -n "$n"
	fi
	# With BASE set, the base keeps its own copy, taken before this build
	# first opens the cache: a newer build may migrate the store to a format
	# the base cannot read (base_links opens it with the base).
	if [ -n "${BASE:-}" ]; then
		base_links_dir=$links_dir.base-$(git rev-parse --short "$BASE")
		[ -d "$base_links_dir" ] || cp -r "$links_dir" "$base_links_dir"
	fi
	# A store cached by an older build is brought to this build's format
	# once, here (an open migrates it and rebuilds its indexes, minutes at
	# 1M links), not by every server started on a copy of it.
	step "open the cached store with this build (migrates an older one once)"
	"$work/linkgate" links list --store "pebble:$links_dir" --limit 1 >/dev/null
}
