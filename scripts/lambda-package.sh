#!/usr/bin/env bash
# make lambda: the AWS Lambda artifacts for both architectures, in
# dist/lambda/:
#   function_linux_{arm64,amd64}.zip   bootstrap (linkgate, runtime provided.al2023)
#   extension_linux_{arm64,amd64}.zip  layer: extensions/linkgate-extension
#   bench_agent_linux_{arm64,amd64}.zip bootstrap (linkgate-bench-agent, linkgate bench's agent)
# Static, stripped builds; the zips are byte-for-byte reproducible (fixed
# timestamps and modes), so an unchanged build deploys as unchanged code.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$LINKGATE_ROOT"
export GOTOOLCHAIN=local CGO_ENABLED=0 GOOS=linux
VERSION=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
out=dist/lambda
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
rm -rf "$out"
mkdir -p "$out"

# zipdir DIR ZIP FILE... zips FILEs (relative to DIR) reproducibly.
zipdir() {
	local dir=$1 zip=$2
	shift 2
	(cd "$dir" && find . -exec touch -h -t 198001010000 {} + && TZ=UTC zip -q -X -r "$zip" "$@")
}

for arch in arm64 amd64; do
	mkdir -p "$stage/$arch/function" "$stage/$arch/layer/extensions" "$stage/$arch/bench-agent"
	# lambda.norpc drops aws-lambda-go's go1.x RPC mode, unused on provided.al2023;
	# nopebble leaves the embedded store out (a function keeps links in DynamoDB);
	# functiononly the gateway and the load generator (docs/lambda.md).
	GOARCH=$arch go build -trimpath -tags lambda.norpc,nopebble,functiononly -ldflags "-s -w -X main.version=$VERSION" \
		-o "$stage/$arch/function/bootstrap" ./cmd/linkgate
	GOARCH=$arch go build -trimpath -ldflags "-s -w -X main.version=$VERSION" \
		-o "$stage/$arch/layer/extensions/linkgate-extension" ./cmd/linkgate-extension
	# The load generator's agent is a function of its own: the shortener's links no bench code.
	GOARCH=$arch go build -trimpath -tags lambda.norpc -ldflags "-s -w" \
		-o "$stage/$arch/bench-agent/bootstrap" ./cmd/linkgate-bench-agent
	chmod 0755 "$stage/$arch/function/bootstrap" "$stage/$arch/layer/extensions/linkgate-extension" "$stage/$arch/layer/extensions" \
		"$stage/$arch/bench-agent/bootstrap"
	zipdir "$stage/$arch/function" "$LINKGATE_ROOT/$out/function_linux_$arch.zip" bootstrap
	zipdir "$stage/$arch/layer" "$LINKGATE_ROOT/$out/extension_linux_$arch.zip" extensions
	zipdir "$stage/$arch/bench-agent" "$LINKGATE_ROOT/$out/bench_agent_linux_$arch.zip" bootstrap
	mb() { awk -v b="$(stat -c %s "$1")" 'BEGIN { printf "%.1f MB", b / 1e6 }'; }
	echo "$arch: bootstrap $(mb "$stage/$arch/function/bootstrap") (zip $(mb "$out/function_linux_$arch.zip")), linkgate-extension $(mb "$stage/$arch/layer/extensions/linkgate-extension") (zip $(mb "$out/extension_linux_$arch.zip"))"
done
ls -l "$out"
