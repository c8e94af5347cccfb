# One command runs every check: `make test` (see README.md). CI runs it through .ci/run.
GO          ?= go
GOBIN       := $(shell $(GO) env GOPATH)/bin
STATICCHECK := $(GOBIN)/staticcheck
STATICCHECK_VERSION := v0.8.2
# Packages with integration tests start Temporal servers and containers; give them room.
TEST_TIMEOUT ?= 75m

.PHONY: test setup check vet staticcheck unit build bench demo clean

## test: install and start what the tests need (Docker, gVisor, test images), then every check.
test: setup check

## setup: Debian's docker.io and runsc, dockerd, the locally built test images (only what is missing).
setup:
	@if [ "$$(id -u)" = 0 ]; then scripts/setup-docker.sh; \
	else echo "make setup: not root; assuming dockerd and the test images are already there" >&2; fi

## check: vet, staticcheck (when it installs), and every test with the race detector.
check: vet staticcheck
	SANDBOXFLOW_REQUIRE_DOCKER=1 $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...

vet:
	$(GO) vet ./...

staticcheck:
	@if [ ! -x "$(STATICCHECK)" ]; then \
		GOFLAGS= $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) \
		|| echo "staticcheck did not install; skipping it" >&2; fi
	@if [ -x "$(STATICCHECK)" ]; then echo "$(STATICCHECK) ./..."; $(STATICCHECK) ./...; fi

## unit: the fast tests only (no Docker, no Temporal server).
unit:
	$(GO) test -count=1 ./guard/... ./backends/callable/... ./backends/local/...

## build: bin/worker and bin/starter.
build:
	$(GO) build -o bin/ ./worker ./starter

## bench: the Docker backend's print(1) against `docker run --rm` of the same container.
bench: setup
	$(GO) test -run '^$$' -bench . -benchtime 30x -count 1 ./backends/docker/

## demo: the main job: embedded Temporal + UI, a worker, and a run that waits for your approval.
demo: build
	scripts/demo.sh

clean:
	rm -rf bin
