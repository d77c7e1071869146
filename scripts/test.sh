#!/usr/bin/env bash
# The test command (README "Quick start"; .ci/run calls it). On a fresh
# machine of this kind it installs what the tests need, checks formatting,
# vets, lints, builds both architectures, then runs every test — unit,
# integration against real components, end-to-end, short fuzz runs, the
# arm64 smoke — inside a network namespace that has only loopback.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$LINKGATE_ROOT"
export GOTOOLCHAIN=local

scripts/install-deps.sh

step "gofmt"
bad=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.cache/*'))
[ -z "$bad" ] || die "gofmt would change: $bad"

step "go vet"
go vet ./...
# The Lambda function's builds (scripts/lambda-package.sh) leave out the
# embedded store and the bench and gateway commands: vet those file sets too.
for tags in nopebble lambda.norpc,nopebble,functiononly; do
	go vet -tags "$tags" ./cmd/linkgate
done

step "staticcheck"
.cache/bin/staticcheck ./...

step "build (linux/amd64 and linux/arm64)"
go build ./...
make --no-print-directory cross

step "govulncheck (tools/vulncheck, database golang.org/x/vulndb@$LINKGATE_VULNDB_VERSION)"
vulndb=.cache/vulndb/$LINKGATE_VULNDB_VERSION
if [ -f "$vulndb/index/db.json" ]; then
	go run ./tools/vulncheck -govulncheck .cache/bin/govulncheck -db "$vulndb" -accepted tools/vulncheck/accepted.txt ./cmd/...
elif [ "${CI:-}" = true ]; then
	die "no vulnerability database at $vulndb (scripts/install-deps.sh could not fetch golang.org/x/vulndb)"
else
	echo "note: no vulnerability database (offline?): govulncheck skipped" >&2
fi

# No separate compile step: go mod download (install-deps.sh) fetched every
# module the builds need, and go vet has compiled every test file already.
# go test caches no linked test binary, so compiling them here only linked
# each one a second time (about 2 minutes).

if [ "$(id -u)" = 0 ] && unshare -n true 2>/dev/null; then
	step "tests (loopback-only network namespace)"
	unshare -n scripts/test-isolated.sh
else
	echo "note: cannot create a network namespace here; running tests in the host network" >&2
	scripts/test-isolated.sh
fi
