# linkgate — see README.md. `make test` is the test command CI runs.
GO       ?= go
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT   ?= $(shell git rev-parse HEAD 2>/dev/null)$(shell git diff --quiet HEAD -- 2>/dev/null || echo +dirty)
LDFLAGS  := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT)
# lambda.norpc drops aws-lambda-go's RPC mode (the retired go1.x runtime): it
# links net/rpc's html/template debug page, which disables dead-code
# elimination of methods and costs the binary about 7 MB. grpcnotrace drops
# gRPC's golang.org/x/net/trace (the same html/template reason; linkgate
# never sets grpc.EnableTracing nor serves http.DefaultServeMux, where
# x/net/trace's /debug/requests pages would be). tools/release builds with
# the same tags (TestNoTemplateExecutor).
TAGS     := lambda.norpc,grpcnotrace
export GOTOOLCHAIN := local

.PHONY: all build test cross image release clean bench-generator bench-serve bench-creates bench-engines bench-dynamodb bench-dynamodb-units bench-visits bench-stats bench-abuse lambda lambda-bench bench-gateway
all: build

build:
	$(GO) build -trimpath -tags "$(TAGS)" -ldflags "$(LDFLAGS)" -o bin/linkgate ./cmd/linkgate

## test: the test command — installs what it needs, then runs everything.
test:
	scripts/test.sh

## cross: static, reproducible binaries for linux/amd64 and linux/arm64 (AWS
## Graviton): dist/linkgate_linux_ARCH, dist/linkgate-extension_linux_ARCH.
cross:
	$(GO) run ./tools/release build -version $(VERSION) -out dist

## image: OCI images for linux/amd64 and linux/arm64 from make cross's
## binaries, FROM scratch, in dist/image/: oci/ (a layout holding the
## multi-arch index) and linkgate_VERSION_linux_ARCH.image.tar per arch
## (docker/podman load). The Dockerfile builds the same image with Docker.
image: cross
	$(GO) run ./tools/release image -version $(VERSION) -bin dist -out dist/image

## release: dist/release/ for VERSION=vX.Y.Z — per-arch archives (binaries,
## LICENSE, NOTICE, README, CHANGELOG, systemd units, every dependency's
## licence), CycloneDX SBOMs, SHA256SUMS; two runs give the same bytes.
release:
	$(GO) run ./tools/release install-tools
	$(GO) run ./tools/release release -version $(VERSION) -out dist/release

## bench-serve: redirects and creates on one core vs nginx (docs/serve-benchmarks.md).
bench-serve:
	scripts/bench-serve.sh

## bench-creates: durable creates on one core, this tree vs BASE (default 096063f, the last bbolt release) (docs/serve-benchmarks.md).
bench-creates:
	scripts/bench-creates.sh

## bench-engines: net/http vs fasthttp vs nginx on a trivial redirect.
bench-engines:
	scripts/bench-engines.sh

## lambda: dist/lambda/{function,extension}_linux_{arm64,amd64}.zip for AWS Lambda (README "Run on AWS Lambda").
lambda:
	scripts/lambda-package.sh

## lambda-bench: the function under the Lambda emulator with no extension, linkgate-extension and a naive one; BASE=REV adds REV's function (docs/lambda.md).
lambda-bench:
	scripts/lambda-bench.sh

## bench-dynamodb: redirects through the cache (DynamoDB vs bolt), creates and cold reads against DynamoDB Local,
## then the capacity units visits cost per 1,000 redirects, this tree vs the previous build (docs/dynamodb.md).
bench-dynamodb:
	scripts/bench-dynamodb.sh
	scripts/bench-dynamodb-units.sh

## bench-dynamodb-units: only the capacity units part of bench-dynamodb (docs/dynamodb.md).
bench-dynamodb-units:
	scripts/bench-dynamodb-units.sh

## bench-visits: redirects with visits counted vs not, at a fixed rate and at saturation (docs/visits.md).
bench-visits:
	scripts/bench-visits.sh

## bench-stats: a serve process with 1M links after 100M visits: RssAnon and the statistics queries through the API (docs/visits.md).
bench-stats:
	scripts/bench-stats.sh

## bench-abuse: redirects at a constant rate, quiet and during a create flood at 10× create capacity and a QR flood, also against a before server (BEFORE_ARGS, BEFORE_REF; docs/security.md).
bench-abuse:
	scripts/bench-abuse.sh

## bench-gateway: the seed's APISIX scenarios vs nginx proxy_pass (docs/gateway.md).
bench-gateway:
	scripts/bench-gateway.sh

clean:
	rm -rf bin dist .cache/test-logs .cache/test-artifacts

## bench-generator: linkgate bench vs Debian wrk, closed loop, against a
## 1-worker nginx `return 200`, each pinned to one core (docs/bench.md).
bench-generator:
	flock -o /tmp/linkgate-bench.lock scripts/bench-generator.sh
