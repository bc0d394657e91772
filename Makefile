# The two commands a new user needs: `make run` and `make test`.
GO       ?= go
BIN      := bin/kproxy
GOFLAGS_TEST ?= -race -timeout 25m
DURATION ?= 5m
SOAK     ?= 30m
# The measurement targets write their reports under REPORTS, ignored by git;
# REPORTS=docs publishes them as the committed docs/*.md pages.
REPORTS  ?= results

.PHONY: help run build test quick lint vet unit fuzz deploy-check clients docs bench scale zones chaos soak kafscale clean

help: ## this list: each target and what it does
	@grep -E '^[a-z][a-z-]*:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([a-z-]+):.*## /\1\t/' | awk -F'\t' '{printf "  %-13s %s\n", $$1, $$2}'

run: build ## a working local cluster: embedded etcd, 3 stub brokers, 1 proxy on 127.0.0.1:9092
	./$(BIN) dev

build: ## bin/kproxy, the one binary
	$(GO) build -o $(BIN) ./cmd/kproxy

test: clients lint vet unit fuzz deploy-check ## lint, vet and every test under -race (includes the client matrix, a short fault run and the deployment files), then a short fuzz run

# Staticcheck is run at a pinned version with go run, so it stays out of
# go.mod, with its default checks (there is no staticcheck.conf).
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
lint: ## staticcheck and gofmt -l (fails when gofmt would change a file)
	$(GO) run $(STATICCHECK) ./...
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt -l lists files:"; echo "$$out"; exit 1; fi

quick: ## go test -short ./...: no client installs, no multi-process or long runs; a few minutes
	$(GO) test -short -timeout 10m ./...

vet: ## go vet ./...
	$(GO) vet ./...

unit: ## every test under -race (the real-KafScale checks too when KAFSCALE_SRC is set)
	@case "$$KAFSCALE_SRC" in ""|off) echo "unit: KAFSCALE_SRC unset: the real-KafScale checks are skipped (make kafscale runs them)";; esac
	$(GO) test $(GOFLAGS_TEST) ./...

deploy-check: ## render the Helm chart offline and decode it strictly (its own module: helm stays out of kproxy's dependencies)
	cd deploy/check && $(GO) vet ./... && $(GO) test -count=1 ./...

# Go fuzzes one target per run; each runs FUZZTIME beyond its corpus in
# testdata/fuzz (new finds go to the build cache, so the tree is unchanged).
FUZZTIME ?= 5s
FUZZ_TARGETS := internal/kwire:FuzzReadGrowing internal/crc32c:FuzzChecksum proxy/proxyproto:FuzzParse proxy:FuzzParseHeader proxy:FuzzConnection proxy/apis:FuzzDispatch proxy/apis/recordcheck:FuzzCheck proxy/apis/recordcheck:FuzzAcceptedReadable proxy/apis/recordcheck:FuzzScan proxy/crypt:FuzzDecryptEncrypt
fuzz: ## the fuzz targets of frame, header and request parsing, FUZZTIME each
	@FUZZTIME=$(FUZZTIME) GO=$(GO) ./scripts/fuzz.sh $(FUZZ_TARGETS)

clients: ## kcat, kafkajs and haproxy for the client matrix and the load balancer tests (skipped with a message when they cannot be installed)
	./scripts/install-clients.sh

docs: clients ## regenerate docs/compatibility.md from a full client-matrix run (tests never write docs otherwise)
	KPROXY_WRITE_DOCS=1 $(GO) test $(GOFLAGS_TEST) -count=1 ./integration/compat/

bench: ## proxy cost side by side with direct and a plain TCP relay; writes $(REPORTS)/benchmarks.md (REPORTS=docs publishes it)
	@mkdir -p $(REPORTS)
	$(GO) run ./bench/cmd/benchrun -docs $(REPORTS)/benchmarks.md

scale: ## 10k, 30k and 100k partitions and 1,000 simulated brokers through 2 proxies (SCALEFLAGS=-quick for a smoke run); writes $(REPORTS)/scale.md
	@mkdir -p $(REPORTS)
	$(GO) run ./bench/cmd/scalerun -docs $(REPORTS)/scale.md $(SCALEFLAGS)

zones: ## zone-aware fetch routing: 3 zones x 2 brokers, owner vs zone routing side by side (ZONESFLAGS for experiments); writes $(REPORTS)/zones.md
	@mkdir -p $(REPORTS)
	$(GO) run ./bench/cmd/zonesrun -docs $(REPORTS)/zones.md $(ZONESFLAGS)

chaos: ## the full fault suite (DURATION=5m; CHAOSFLAGS=-zones=a,b,c for the zone-routing mode); leaves a report under results/ and writes $(REPORTS)/correctness.md (kchaos builds kproxy with -tags kproxy_unsafe)
	$(GO) run ./integration/chaos/cmd/kchaos -duration $(DURATION) -results results/ -docs $(REPORTS)/correctness.md $(CHAOSFLAGS)

soak: ## a proxy under well-behaved and hostile clients for SOAK (30m; SOAK=5m for a short run); writes $(REPORTS)/soak.md and soak.png
	@mkdir -p $(REPORTS)
	$(GO) run ./testkit/soak/cmd/ksoak -duration $(SOAK) -docs $(REPORTS)/soak.md

# KafScale's source archive and build.sh; a user's clone has no ../shared, so
# only this target looks for it.
KAFSCALE_SRC ?= $(firstword $(patsubst %/build.sh,%,$(wildcard ../shared/kafscale/build.sh ../../shared/kafscale/build.sh)))
KAFSCALE_PKGS := ./integration/kafscale/ ./leasewatch/kafscale/ ./testkit/kafscalerig/...
kafscale: ## build KafScale's broker and proxy (KAFSCALE_SRC, default ../shared/kafscale) into bin/kafscale/, then run kproxy's checks on two real brokers
	@if [ -z "$(KAFSCALE_SRC)" ] || [ "$(KAFSCALE_SRC)" = off ]; then echo "kafscale: set KAFSCALE_SRC to the folder with KafScale's build.sh and source archive"; exit 1; fi
	KAFSCALE_SRC=$(abspath $(KAFSCALE_SRC)) $(GO) test $(GOFLAGS_TEST) -count=1 -run 'Real|TestWatch' $(KAFSCALE_PKGS)

clean: ## remove bin/ and results/
	rm -rf bin results
