# Kiln — build, run, test, bench. Every target sets up what it needs.
GO      ?= go
BIN     := bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
ADDR    ?= 127.0.0.1:8420

.PHONY: all build run test test-short bench fuzz vet clean

all: build

## build: the kiln binary (server + CLI) into bin/
build:
	$(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/kiln ./cmd/kiln

## run: build and serve on 127.0.0.1 with the embedded defaults (~/.kiln, demo model)
run: build
	$(BIN)/kiln serve --addr $(ADDR)

## test: vet and every test, including the end-to-end crash test
test: vet
	$(GO) test -count=1 -timeout 15m ./...

## test-short: the unit tests only
test-short:
	$(GO) test -count=1 -short ./...

vet:
	$(GO) vet ./...

## bench: the figures the issues ask for, as a table (LangGraph JS alongside when Node is present)
bench: build
	$(GO) run ./cmd/kiln-bench

## fuzz: run every fuzz target for FUZZTIME each
FUZZTIME ?= 30s
fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list 'Fuzz.*' $$pkg 2>/dev/null | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

clean:
	rm -rf $(BIN)
