#!/usr/bin/env bash
# The units part of make bench-dynamodb: what visit statistics cost on
# DynamoDB, in capacity units per 1,000 redirects, this tree against the
# previous build (BASE, a git revision) in the same run. tools/ddbunits
# does the work (tables, preloads, servers, traffic, the metering proxy,
# the table); this script builds, starts DynamoDB Local in a loopback-only
# network namespace and holds the benchmark lock. Results and their
# reading: docs/dynamodb.md.
#
# Settings (environment): BASE (the previous build: by default the last
# one that kept visit counters on the link items; empty: this tree only),
# RATE redirects/s (500), UNITS_DURATION per measurement (2m),
# SHAPES (uniform:100000 zipf:1.1:1000000), INSTANCES (1,4), LAMBDA
# concurrent function environments under the Lambda runtime interface
# emulator (4; scripts/install-deps.sh installs it) each living LAMBDA_LIFE
# (40s), SERVER_CPU for the servers and functions, LOAD_CPU for DynamoDB
# Local and the load. The run is kept as data in
# docs/results/bench-dynamodb-units/ (tools/benchcmp; its table in
# docs/results/bench-dynamodb-units.md), and every call's units per
# operation in its calls/<date>-<commit>.json (UNITS_JSON: elsewhere).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/bench-lib.sh"
cd "$LINKGATE_ROOT"
export GOTOOLCHAIN=local
BASE=${BASE-8ac71ab}
RATE=${RATE:-500}
UNITS_DURATION=${UNITS_DURATION:-2m}
SHAPES=${SHAPES:-uniform:100000 zipf:1.1:1000000}
INSTANCES=${INSTANCES:-1,4}
LAMBDA=${LAMBDA:-4}
LAMBDA_LIFE=${LAMBDA_LIFE:-40s}

# units_table RECORDS prints the tables of a run's records (ddbunits
# -records) and keeps the run (publish_table). `--table RECORDS` does only
# this, for runs kept before the records existed (ddbunits -convert).
units_table() {
	table "$1" <<'TABLE'
| build | traffic | instances | redirects | write units | of which fold | per 1,000 redirects | write calls | read units | per 1,000 redirects | read units per 1,000 misses | of which computed | $ per 1M redirects |
|---|---|---|---|---|---|---|---|---|---|---|---|---|
{{- range names "redirects"}}
| {{.}} | {{printf "%.0f" (med . "redirects")}} | {{printf "%.0f" (med . "write_units")}}{{if gt (med . "refused") 0.0}} ({{printf "%.0f" (med . "refused")}} refused){{end}} | {{printf "%.0f" (med . "fold_write_units")}} | **{{printf "%.1f" (med . "wru_per_1000")}}** | {{printf "%.0f" (med . "write_calls")}} | {{printf "%.1f" (med . "read_units")}} | {{printf "%.1f" (med . "rru_per_1000")}} | {{printf "%.0f" (med . "rru_per_1000_misses")}} | {{printf "%.1f" (med . "computed")}} | {{printf "%.4f" (med . "usd_per_million")}} |
{{- end}}

Redirects without an answer: {{total "errors"}}; links whose stored total differs from the visits sent: {{total "stored_wrong"}}.
{{- if names "item_kb"}}

| build | old item | read units per 1,000 misses, 1st pass | write units per 1,000 redirects, 1st pass | migration: write, read units per item | read units per 1,000 misses, 2nd pass |
|---|---|---|---|---|---|
{{- range names "item_kb"}}
| {{.}} | {{printf "%.1f" (med . "item_kb")}} KB | {{printf "%.0f" (med . "first_rru_per_1000_misses")}} | {{printf "%.0f" (med . "first_wru_per_1000")}} | {{printf "%.1f" (med . "migration_wru_per_item")}}, {{printf "%.1f" (med . "migration_rru_per_item")}} | **{{printf "%.0f" (med . "second_rru_per_1000_misses")}}** |
{{- end}}
{{- end}}
TABLE
}

if [ "${1:-}" = --table ]; then
	bench_workdir
	benchcmp_build "$work"
	units_table "$2"
	exit
fi

if [ "${1:-}" = --inner ]; then
	work=$2
	ip link set lo up
	port=$(free_port)
	ddb=$(start_dynamodb_local "$port" "$work/dynamodb-local.log")
	trap 'kill "$ddb" 2>/dev/null || true' EXIT
	wait_tcp 127.0.0.1 "$port" 60 || { cat "$work/dynamodb-local.log"; die "DynamoDB Local did not start"; }
	taskset -a -p -c "$LOAD_CPU" "$ddb" >/dev/null
	export AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench AWS_EC2_METADATA_DISABLED=true \
		AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null
	builds=()
	[ -n "$BASE" ] && builds+=(-build "before=$work/linkgate-base")
	builds+=(-build "after=$work/linkgate")
	shapes=()
	for s in $SHAPES; do shapes+=(-shape "$s"); done
	lambda=()
	[ -x .cache/bin/aws-lambda-rie ] && lambda=(-rie "$LINKGATE_ROOT/.cache/bin/aws-lambda-rie" -lambda "$LAMBDA" -lambda-life "$LAMBDA_LIFE")
	taskset -c "$LOAD_CPU" "$work/ddbunits" -dynamodb "http://127.0.0.1:$port" "${builds[@]}" "${shapes[@]}" \
		-instances "$INSTANCES" -rate "$RATE" -duration "$UNITS_DURATION" -cpus "$SERVER_CPU" "${lambda[@]}" \
		-work "$work" -json "$work/units.json" -records "$work/units.jsonl"
	exit
fi

[ "$(id -u)" = 0 ] && unshare -n true 2>/dev/null || die "bench-dynamodb's units need root (a loopback-only network namespace for DynamoDB Local)"
scripts/install-deps.sh >/dev/null # DynamoDB Local and the Lambda emulator
bench_workdir # $work, $pids: killed and removed on exit
step "build linkgate and ddbunits"
go build -trimpath -o "$work/linkgate" ./cmd/linkgate
go build -o "$work/ddbunits" ./tools/ddbunits
benchcmp_build "$work"
if [ -n "$BASE" ]; then
	step "build the previous build ($BASE)"
	mkdir "$work/base-src"
	git archive "$BASE" | tar -x -C "$work/base-src"
	(cd "$work/base-src" && go build -trimpath -o "$work/linkgate-base" ./cmd/linkgate)
fi
step "DynamoDB capacity units per 1,000 redirects (holding $BENCH_LOCK)"
flock -o "$BENCH_LOCK" unshare -n "$0" --inner "$work"
commit=$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- || echo -dirty)
out=${UNITS_JSON:-docs/results/bench-dynamodb-units/calls/$(date -u +%F)-$commit.json}
mkdir -p "$(dirname "$out")"
cp "$work/units.json" "$out"
echo "every call's units kept in $out"
units_table "$work/units.jsonl"
