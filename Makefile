SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := test
MAKEFLAGS += --no-builtin-rules

GO      ?= go
BIN     := $(CURDIR)/bin
TOOLS   := -modfile=tools/go.mod
# Packages run again under -race: the in-memory core, and where goroutines
# meet real etcd and gRPC (the store's sync and fan-out, the replica's
# wiring, the server's streams), about a minute more on 2 cores.
RACED   := ./scheduler/... ./convert/ ./store/ ./replica/ ./server/

.PHONY: all build run test promtool python-deps protoc-python python-proto test-python test-race test-e2e test-faults lint vet proto tools bench ghz clean conformance conformance-quick

all: lint test

build:
	$(GO) build -o $(BIN)/berth ./cmd/berth
	$(GO) build -o $(BIN)/berthctl ./clients/berthctl

run: build
	$(BIN)/berth serve --data-dir ./berth-data

# Fuzzing is budgeted in executions, not seconds: Go 1.26's fuzz coordinator
# can report a spurious "context deadline exceeded" failure when a duration
# budget expires while a worker is mid-input (golang/go#75804, fixed in 1.27).
# 50,000 executions take about 10 s per target on a quiet 2-core machine.
FUZZ_EXECS ?= 50000x

test: vet promtool python-deps
	$(GO) test -count=1 -timeout 9m ./...
	$(GO) test -count=1 -race -timeout 8m $(RACED)
	$(GO) test -run='^$$' -fuzz=FuzzValidateAndConvert -fuzztime=$(FUZZ_EXECS) ./server/
	$(GO) test -run='^$$' -fuzz=FuzzStoredValueToCore -fuzztime=$(FUZZ_EXECS) ./convert/
	if [ "$(CONFORMANCE)" != 0 ]; then $(MAKE) conformance-quick; fi

# promtool (Debian's prometheus package) lets `go test ./deploy/` run
# `promtool check rules` and `promtool test rules`; without it the alert rules
# are checked structurally only. Installed in CI, or as root where no systemd
# runs (a container): on a booted host the package would start a Prometheus.
promtool:
	@command -v promtool >/dev/null || { \
		if [[ $${CI:-} == true || ( $$(id -u) == 0 && ! -d /run/systemd/system ) ]] && command -v apt-get >/dev/null; then \
			{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null; } \
				|| echo "promtool: install failed; alert rules are checked structurally only" >&2; \
		else echo "promtool not installed: alert rules are checked structurally only (apt-get install prometheus)" >&2; fi; }

# Debian's python3-grpcio and python3-protobuf let `go test ./clients/python/`
# drive a real replica from the Python client; without them it skips (and
# fails under CI=true). Installed in CI, or as root where no systemd runs,
# like promtool. The client needs /usr/bin/python3: a pyenv or virtualenv
# python on PATH does not see Debian's packages.
PYTHON     := /usr/bin/python3
PY_PKGS    := python3-grpcio python3-protobuf
PROTOC_PKGS := protobuf-compiler protobuf-compiler-grpc libprotobuf-dev
define apt_install # $(1): what is missing, $(2): packages
if [[ $${CI:-} == true || ( $$(id -u) == 0 && ! -d /run/systemd/system ) ]] && command -v apt-get >/dev/null; then \
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(2) >/dev/null; \
else echo "$(1) missing: apt-get install $(2)" >&2; false; fi
endef

python-deps:
	@$(PYTHON) -c 'import grpc, google.protobuf' 2>/dev/null || { \
		$(call apt_install,python3 grpc,$(PY_PKGS)) \
			|| echo "python-deps: no python3 grpc; the Python client tests will skip" >&2; }

protoc-python:
	@command -v protoc >/dev/null && command -v grpc_python_plugin >/dev/null && [[ -f /usr/include/google/protobuf/any.proto ]] \
		|| { $(call apt_install,protoc with grpc_python_plugin,$(PROTOC_PKGS)); }

# The Python stubs are committed, like the Go ones, so users need no
# compiler; regenerate them with Debian's protoc and grpc_python_plugin (the
# versions python3-protobuf and python3-grpcio match).
PY_CLIENT := clients/python
python-proto: protoc-python
	protoc -Iproto -I/usr/include --python_out=$(PY_CLIENT) --grpc_out=$(PY_CLIENT) \
		--plugin=protoc-gen-grpc=$$(command -v grpc_python_plugin) proto/berth/v1/*.proto
	rm -f $(PY_CLIENT)/berth/v1/types_pb2_grpc.py # types.proto has no service
	protoc -I$(PY_CLIENT) -I/usr/include --python_out=$(PY_CLIENT) $(PY_CLIENT)/berth_client/rpc_status.proto

# The Python client's own tests alone; `make test` runs them through go test.
test-python: python-deps
	cd $(PY_CLIENT) && $(PYTHON) -m unittest discover -s tests -t . -p 'test_*.py'

test-race:
	$(GO) test -count=1 -race -timeout 20m ./...

test-e2e:
	$(GO) test -count=1 -timeout 10m -run 'E2E' -v ./e2e/...

# The fault suite in full: 3 etcd members and 3 replicas as processes, each
# fault (replica kill -9, etcd member and leader kill, partition past the
# lease, restart of all) for FAULT_ROUNDS rounds of at least FAULT_PODS pods.
# `make test` runs it reduced (1 round, 300 pods).
FAULT_ROUNDS ?= 5
FAULT_PODS   ?= 2000
FAULT_RATE   ?= 400
test-faults:
	BERTH_FAULT_ROUNDS=$(FAULT_ROUNDS) BERTH_FAULT_PODS=$(FAULT_PODS) BERTH_FAULT_RATE=$(FAULT_RATE) \
		$(GO) test -count=1 -timeout 60m -run 'Fault' -v ./e2e/

# gofmt too: a file left unformatted should fail CI, not wait for lint.
vet:
	$(GO) vet ./...
	test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }

# Berth's plugins against kube-scheduler's own (conformance/ is a module of
# its own, so only these targets build k8s.io/kubernetes). `make test` runs
# the quick check. Its first build, from a cold Go build cache, costs about
# 17 CPU-minutes (k8s.io/client-go's generated clients, which kube's
# framework imports); Go's build cache keeps it, so later runs, from any
# clone on the same machine, rebuild only what changed in Berth.
# `make test CONFORMANCE=0` leaves the check out.
CONFORMANCE           ?= 1
CONFORMANCE_SCENARIOS ?= 10000
CONFORMANCE_SEED      ?= 1
conformance:
	cd conformance && $(GO) test -count=1 -timeout 30m -v -run 'TestConformance$$' . \
		-scenarios $(CONFORMANCE_SCENARIOS) -seed $(CONFORMANCE_SEED)

# A few hundred fixed scenarios plus the checks that the comparison and
# the shrinker can fail.
conformance-quick:
	cd conformance && $(GO) test -count=1 -timeout 15m . -scenarios 300 -seed 1

tools:
	$(GO) build $(TOOLS) -o $(BIN)/ github.com/bufbuild/buf/cmd/buf google.golang.org/protobuf/cmd/protoc-gen-go google.golang.org/grpc/cmd/protoc-gen-go-grpc

lint: tools vet
	$(BIN)/buf lint

proto: tools python-proto
	$(BIN)/buf lint
	$(BIN)/buf generate

bench: build
	$(BIN)/berth bench --nodes 5000 --pods 10000

# ghz profiles against a running replica (ADDR, default 127.0.0.1:7070);
# GHZ_PROFILES picks some of: health submit-pod schedule list-pods.
GHZ_PROFILES ?= all
ghz:
	$(GO) install github.com/bojand/ghz/cmd/ghz@v0.120.0
	deploy/ghz/run.sh $(GHZ_PROFILES)

clean:
	rm -rf $(BIN) berth-data
