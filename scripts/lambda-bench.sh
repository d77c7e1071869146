#!/usr/bin/env bash
# make lambda-bench: the seed's Lambda dashboard on this machine. linkgate
# runs as a function under the AWS Lambda runtime interface emulator against
# DynamoDB Local, with no extension, with linkgate-extension and with a naive
# extension (synchronous 30 ms upload per INVOKE); tools/lambdabench prints
# the table, writes docs/lambda-bench.svg and keeps the raw results.
#
# Settings (environment): N warm invokes per variant (200), RESTARTS cold
# starts per variant (10), CPU_QUOTA in CPUs for the emulator tree (none;
# e.g. 0.25 to mimic a small function), FUNCTION_CPU the CPU the emulator
# tree is pinned to (0; the harness and DynamoDB Local get the others),
# OUT the folder for raw results, EXTENSION_ENV extra NAME=VALUE,… settings
# for linkgate-extension, BASE a commit whose function is measured beside
# this one's, with no extension (e.g. 096063f, the build before pebble: init
# time and size before/after). Needs root (namespaces, bind mounts).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/bench-lib.sh"
cd "$LINKGATE_ROOT"
export GOTOOLCHAIN=local

if [ "${1:-}" = --inner ]; then
	# In a fresh network namespace: loopback only (DynamoDB Local listens
	# on every interface).
	work=$2
	ip link set lo up
	port=$(free_port)
	ddb=$(start_dynamodb_local "$port" "$work/dynamodb-local.log")
	trap 'kill "$ddb" 2>/dev/null || true' EXIT
	wait_tcp 127.0.0.1 "$port" 30 || { cat "$work/dynamodb-local.log"; die "DynamoDB Local did not start"; }
	AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench \
		AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:$port "$work/bootstrap" dynamodb create-table --wait >/dev/null
	others=$(seq 0 $(($(nproc) - 1)) | grep -vx "${FUNCTION_CPU:-0}" | paste -sd, -)
	[ -n "$others" ] && taskset -pc "$others" "$ddb" >/dev/null
	${others:+taskset -c "$others"} "$work/lambdabench" \
		-rie .cache/bin/aws-lambda-rie -function "$work/bootstrap" -extension "$work/linkgate-extension" \
		-naive "$work/naive-extension" -dynamodb "http://127.0.0.1:$port" \
		-n "${N:-200}" -restarts "${RESTARTS:-10}" -cpu-quota "${CPU_QUOTA:-0}" -cpus "${FUNCTION_CPU:-0}" \
		-out "$work/results" -svg docs/lambda-bench.svg ${EXTENSION_ENV:+-extension-env "$EXTENSION_ENV"} \
		${BASE:+-baseline "$work/base/bootstrap" -baseline-name "$BASE"}
	exit # the trap stops DynamoDB Local
fi

[ "$(id -u)" = 0 ] || die "lambda-bench needs root: mount and network namespaces"
scripts/install-deps.sh >/dev/null # the emulator and DynamoDB Local
work=${OUT:-$(mktemp -d /tmp/linkgate-lambda-bench.XXXXXX)}
mkdir -p "$work"
step "build (stripped, as make lambda): function, linkgate-extension, naive extension, harness"
CGO_ENABLED=0 go build -trimpath -tags lambda.norpc,nopebble,functiononly -ldflags "-s -w" -o "$work/bootstrap" ./cmd/linkgate
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$work/linkgate-extension" ./cmd/linkgate-extension
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$work/naive-extension" ./tools/lambdabench/naiveext
go build -o "$work/lambdabench" ./tools/lambdabench
if [ -n "${BASE:-}" ]; then
	# The same tags: a commit that predates one builds as it did.
	step "build the function at $BASE the same way (in a worktree under $work; named bootstrap, as /proc shows it)"
	mkdir -p "$work/base"
	git worktree add --detach "$work/base-src" "$BASE" >/dev/null
	(cd "$work/base-src" && CGO_ENABLED=0 go build -trimpath -tags lambda.norpc,nopebble,functiononly -ldflags "-s -w" -o "$work/base/bootstrap" ./cmd/linkgate)
	git worktree remove --force "$work/base-src"
fi
step "measure (holding $BENCH_LOCK)"
# -o: the lock is not inherited by what the run starts, so nothing left
# behind can hold it.
flock -o "$BENCH_LOCK" unshare -n "$0" --inner "$work" | tee "$work/report.md"
echo "raw results: $work/results; table: $work/report.md; chart: docs/lambda-bench.svg"
