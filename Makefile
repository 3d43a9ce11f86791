# couponlink. `make run` and `make test` are the two set-up commands.
# go.mod says go 1.27: every go command of the Makefile takes Go 1.27.3 (from
# the module proxy once, then its cache), whatever Go the machine starts on.
export GOTOOLCHAIN=go1.27.3
SERVERS := deploy/local/servers.sh
GO      ?= go
BIN     := bin/couponlink
TESTFLAGS ?= -race -count=1 -timeout 15m

.PHONY: build run test test-console console-e2e-deps test-portable test-unit servers-up servers-down bench bench-smoke chaos chaos-smoke vet vuln lint clean

# -buildvcs=auto: the git revision in `couponlink version` (a machine's
# GOFLAGS may turn it off), left out when there is no git checkout.
build:
	$(GO) build -buildvcs=auto -o $(BIN) ./cmd/couponlink

# Start the private MariaDB + Redis, migrate, run the cdc (background) and the API (foreground).
run: build
	@BIN=$(BIN) deploy/local/run.sh

# Start the private servers, run every test, stop the servers (also on failure);
# then a smoke run of the benchmark program (every row at tiny sizes, ~1 min, on
# its own private servers; fails on any error or failed check), so it cannot rot;
# then the 60-second chaos run (chaos-smoke, on its own private servers).
test: console-e2e-deps
	@eval "$$($(SERVERS) up)" && \
	  $(GO) vet ./... && \
	  GO=$(GO) deploy/vuln/check.sh && \
	  alerts/check.sh && \
	  $(GO) test $(TESTFLAGS) ./... && \
	  $(MAKE) --no-print-directory test-portable ; rc=$$?; $(SERVERS) down; [ $$rc -eq 0 ] || exit $$rc; \
	  $(GO) run ./cmd/couponlink-bench -smoke -log-level warn > /dev/null && \
	  $(MAKE) --no-print-directory chaos-smoke

# The bootstrap, crash and reconcile suites again with the snapshot position
# taken the way of Oracle MySQL (FLUSH TABLES WITH READ LOCK), forced on
# MariaDB, with canal's and sink's global-lock tests; the packages side by
# side, after the other suites (a global lock stalls every writer of the
# server). Needs the servers' environment (make test provides it).
PORTABLE_SINK_RUN := Bootstrap|Crash|Purged|Portable
test-portable:
	@export COUPONLINK_SNAPSHOT_POSITION=lock; \
	  $(GO) test $(TESTFLAGS) -run '$(PORTABLE_SINK_RUN)' ./sink/ & sink=$$!; \
	  $(GO) test $(TESTFLAGS) -run 'Snapshot' ./canal/ & canal=$$!; \
	  $(GO) test $(TESTFLAGS) ./reconcile/; rc=$$?; \
	  wait $$sink || rc=1; wait $$canal || rc=1; [ $$rc -eq 0 ]

# Only the smoke run of the benchmark program.
bench-smoke:
	$(GO) run ./cmd/couponlink-bench -smoke

# Chromium, node and npm (apt-get when missing) and playwright-core for the
# console's browser test (a Go test of ./console/, run by `make test`).
console-e2e-deps:
	@console/e2e/deps.sh

# Only the console's browser test, on the private servers; screenshots in console/e2e/out/.
test-console:
	@eval "$$($(SERVERS) up)" && $(MAKE) --no-print-directory console-e2e-deps && $(GO) test -count=1 -v -run Browser ./console/

# The seeded fault-injection soak (docs/testing.md "Reliability"): its own private
# MariaDB and Redis, the couponlink processes, API clients, faults drawn from
# the seed, the invariants checked. CHAOSFLAGS: -duration, -seed (reproduce a
# run), -clients, -keep (keep the logs), ...; exit 1 on a violation.
CHAOSFLAGS ?= -duration 10m
chaos:
	$(GO) run ./cmd/couponlink-chaos $(CHAOSFLAGS)

# The 60-second chaos run of make test: a fixed seed, then a random one (printed).
chaos-smoke:
	$(GO) run ./cmd/couponlink-chaos -duration 30s -seed 16 -log-level warn && \
	  $(GO) run ./cmd/couponlink-chaos -duration 30s -log-level warn

# Only the tests that need no server.
test-unit:
	$(GO) test -count=1 ./coupon/ ./canal/

servers-up:
	@$(SERVERS) up
servers-down:
	@$(SERVERS) down

# couponlink beside its ceilings, in one run, on its own private servers
# (the last full run took 32 minutes on 2 cores shared with other work;
# ~1.5 minutes of a run seed 10M coupons for the reconcile row, ~2 are the
# sources phase: docs/performance.md); results in bench/results/.
# BENCHFLAGS=-quick: ~1 minute.
bench:
	$(GO) build -o bin/couponlink-bench ./cmd/couponlink-bench && ./bin/couponlink-bench $(BENCHFLAGS)

vet:
	$(GO) vet ./...

# govulncheck against a vulnerability database built offline from the
# golang.org/x/vulndb module (deploy/vuln/check.sh); make test runs it too.
vuln:
	@GO=$(GO) deploy/vuln/check.sh

clean:
	rm -rf bin .run
