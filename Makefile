# One command runs every check: `make test` (see docs/testing.md). CI runs it through .ci/run.
GO          ?= go
GOBIN       := $(shell $(GO) env GOPATH)/bin
STATICCHECK := $(GOBIN)/staticcheck
STATICCHECK_VERSION := v0.8.2
# Packages with integration tests start Temporal servers and containers; give them room.
TEST_TIMEOUT ?= 75m

WORKFLOWCHECK := $(GOBIN)/workflowcheck
WORKFLOWCHECK_VERSION := v0.6.0
# The official temporal CLI, for the test that follows docs/reviewing.md's OpenSSH + temporal CLI recipe.
# v1.5.1 is the newest release `go install` can build from the module proxy (later ones replace a
# module of their own that the proxy does not serve).
TEMPORAL_CLI := $(GOBIN)/temporal
TEMPORAL_CLI_VERSION := v1.5.1

.PHONY: test setup check vet staticcheck fmt workflowcheck temporal-cli unit build bench bench-e2e bench-waiting demo clean

## test: install and start what the tests need (Docker, gVisor, test images), then every check.
test: setup check

## setup: Debian's docker.io and runsc, dockerd, the locally built test images, a loopback-only
## PostgreSQL for Temporal, chromium for the inbox's browser tests, python3, openssh-client, nodejs,
## npm, jq, the IPv6 loopback and spin for the protocol model (only what is missing).
setup:
	@if [ "$$(id -u)" = 0 ]; then scripts/setup-docker.sh && scripts/setup-postgres.sh && scripts/setup-browser.sh; \
	else echo "make setup: not root; assuming dockerd, the test images, PostgreSQL, chromium and spin are already there" >&2; fi

## check: gofmt, vet, staticcheck, workflowcheck, then every test (unit and integration) with -race.
## SANDBOXFLOW_REQUIRE_ALL=1: a test that lacks what it needs (internal/testkit/need) fails, never skips.
check: fmt vet staticcheck workflowcheck temporal-cli
	SANDBOXFLOW_REQUIRE_ALL=1 SANDBOXFLOW_REQUIRE_DOCKER=1 SANDBOXFLOW_REQUIRE_POSTGRES=1 SANDBOXFLOW_TEMPORAL_CLI=$(TEMPORAL_CLI) $(GO) test -tags integration -race -count=1 -timeout $(TEST_TIMEOUT) ./...

## fmt: fail when a file is not gofmt-formatted.
fmt:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...
	$(GO) vet -tags integration ./...

## workflowcheck: the workflow code is deterministic (no time.Now, goroutines, map ranges, I/O).
workflowcheck:
	@if [ ! -x "$(WORKFLOWCHECK)" ]; then \
		GOFLAGS= $(GO) install go.temporal.io/sdk/contrib/tools/workflowcheck@$(WORKFLOWCHECK_VERSION); fi
	$(WORKFLOWCHECK) ./workflows/...

## temporal-cli: the official temporal CLI (a few minutes the first time).
temporal-cli:
	@if [ ! -x "$(TEMPORAL_CLI)" ]; then \
		GOFLAGS= $(GO) install github.com/temporalio/cli/cmd/temporal@$(TEMPORAL_CLI_VERSION); fi

staticcheck:
	@if [ ! -x "$(STATICCHECK)" ]; then \
		GOFLAGS= $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) \
		|| echo "staticcheck did not install; skipping it" >&2; fi
	@if [ -x "$(STATICCHECK)" ]; then echo "$(STATICCHECK) ./..."; $(STATICCHECK) ./... && $(STATICCHECK) -tags integration ./...; fi

## unit: the fast lane: every test without the integration tag (no Docker, no Temporal server
## linked, no binaries built): guard, contract, workflows (SDK test suite), activities, codec,
## backends, client, approval, egress.
unit:
	$(GO) test -count=1 ./...

## build: bin/worker and bin/starter.
build:
	$(GO) build -o bin/ ./worker ./starter

## bench: the Docker backend's print(1), and a cell print(1) in a live session, against `docker run --rm` of the same container;
## what the outputs capture costs a run (docs/benchmarks.md).
bench: setup
	$(GO) test -tags integration -run '^$$' -bench . -benchtime 30x -count 1 ./backends/docker/

## bench-e2e: what a user waits for, through the real binaries and worker --dev --backend docker, against
## `docker run --rm` of the same container in the same run, under runc, runsc and runsc-current, each with
## the worker's defaults and with tuned settings: p50 and p99 of 100 samples of each kind, 20 approved at
## once, then 1,000 runs with the heap watched and 10,000 runs waiting for approval; prints a markdown
## table (docs/benchmarks.md "End to end"). Knobs: SANDBOXFLOW_BENCH_RUNTIMES, _CONFIGS, _SAMPLES, _BURST,
## _MAX_SANDBOXES, _WARM, _TUNED_DATA_ROOT, _HEAP_RUNS, _WAITING.
bench-e2e: setup
	SANDBOXFLOW_BENCH_E2E=1 $(GO) test -tags integration -run '^$$' -bench EndToEnd -benchtime 1x -count 1 -timeout 100m ./backends/docker/

## bench-waiting: 10,000 runs started by 16 clients at once on one worker --dev --backend local, all
## waiting for approval: every start returns (bounded), a new run's start before and after, the dev
## process's memory (docs/operating.md "Many waiting runs"). make test runs the same test with 2,000 runs;
## SANDBOXFLOW_WAITING_RUNS changes the count.
bench-waiting:
	SANDBOXFLOW_WAITING_RUNS=$${SANDBOXFLOW_WAITING_RUNS:-10000} $(GO) test -tags integration -run '^TestManyWaitingRuns$$' -count 1 -v -timeout 70m ./e2e/

## demo: the main job: embedded Temporal + UI, a worker, and a run that waits for your approval.
demo:
	scripts/demo.sh

clean:
	rm -rf bin
