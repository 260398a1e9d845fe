SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := test
MAKEFLAGS += --no-builtin-rules

GO      ?= go
BIN     := $(CURDIR)/bin
TOOLS   := -modfile=tools/go.mod
# Packages whose tests are pure in-memory logic: cheap enough to run under -race.
CORE    := ./scheduler/...

.PHONY: all build run test test-race test-e2e test-faults lint vet proto tools bench ghz clean

all: lint test

build:
	$(GO) build -o $(BIN)/berth ./cmd/berth
	$(GO) build -o $(BIN)/berthctl ./clients/berthctl

run: build
	$(BIN)/berth serve --data-dir ./berth-data

test: vet
	$(GO) test -count=1 -timeout 9m ./...
	$(GO) test -count=1 -race -timeout 5m $(CORE)
	$(GO) test -run='^$$' -fuzz=FuzzValidateAndConvert -fuzztime=10s ./server/

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

vet:
	$(GO) vet ./...

tools:
	$(GO) build $(TOOLS) -o $(BIN)/ github.com/bufbuild/buf/cmd/buf google.golang.org/protobuf/cmd/protoc-gen-go google.golang.org/grpc/cmd/protoc-gen-go-grpc

lint: tools vet
	$(BIN)/buf lint
	test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }

proto: tools
	$(BIN)/buf lint
	$(BIN)/buf generate

bench: build
	$(BIN)/berth bench --nodes 5000 --pods 10000

ghz:
	$(GO) install github.com/bojand/ghz/cmd/ghz@v0.120.0
	deploy/ghz/submit-pod.sh

clean:
	rm -rf $(BIN) berth-data
