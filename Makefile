# egressd build targets. Every target is also documented in README.md.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
PLATFORMS := linux/amd64 linux/arm64 darwin/arm64

.PHONY: build test lint bench bench-quick release cross clean

## build: the egressd binary for this machine, static, into ./egressd
build:
	CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS)' -o egressd ./cmd/egressd

## test: the whole suite, exactly what CI runs (gofmt, vet, race tests, bounded fuzzing)
test:
	./scripts/test

## lint: gofmt, go vet, systemd unit verification and exposure threshold
lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	go vet ./...
	./scripts/lint-units

## bench: egressd beside direct, goproxy, squid and tinyproxy (writes bench/RESULTS.md), then the Go micro-benchmarks
bench:
	go run ./bench
	go test -run '^$$' -bench . -benchmem ./allowlist/ ./proxy/ ./cmd/egressd/

## bench-quick: the same comparison in under a minute, for spotting regressions
bench-quick:
	go run ./bench --quick --out /dev/stdout

## cross: check that every release platform compiles
cross:
	@for p in $(PLATFORMS); do \
	  echo "build $$p"; \
	  CGO_ENABLED=0 GOOS=$${p%/*} GOARCH=$${p#*/} go build -trimpath -ldflags '$(LDFLAGS)' -o /dev/null ./cmd/egressd || exit 1; \
	done

## release: static, trimmed binaries for every platform into dist/
release:
	@mkdir -p dist
	@for p in $(PLATFORMS); do \
	  out=dist/egressd-$(VERSION)-$${p%/*}-$${p#*/}; \
	  echo "build $$out"; \
	  CGO_ENABLED=0 GOOS=$${p%/*} GOARCH=$${p#*/} go build -trimpath -ldflags '$(LDFLAGS)' -o $$out ./cmd/egressd || exit 1; \
	done
	cd dist && sha256sum egressd-* > SHA256SUMS

clean:
	rm -rf egressd dist
