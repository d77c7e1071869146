# linkgate — see README.md. `make test` is the test command CI runs.
GO       ?= go
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -s -w -X main.version=$(VERSION)
export GOTOOLCHAIN := local

.PHONY: all build test cross clean bench-gateway bench-generator
all: build

build:
	$(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/linkgate ./cmd/linkgate

## test: the test command — installs what it needs, then runs everything.
test:
	scripts/test.sh

## cross: static binaries for linux/amd64 and linux/arm64 (AWS Graviton).
cross:
	@mkdir -p dist
	CGO_ENABLED=0 GOOS=linux GOARCH=amd64 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o dist/linkgate_linux_amd64 ./cmd/linkgate
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o dist/linkgate_linux_arm64 ./cmd/linkgate

## bench-gateway: the seed's APISIX scenarios vs nginx proxy_pass (docs/gateway.md).
bench-gateway:
	scripts/bench-gateway.sh

clean:
	rm -rf bin dist .cache/test-logs .cache/test-artifacts

## bench-generator: linkgate bench vs Debian wrk, closed loop, against a
## 1-worker nginx `return 200`, each pinned to one core (docs/bench.md).
bench-generator:
	flock -o /tmp/linkgate-bench.lock scripts/bench-generator.sh
