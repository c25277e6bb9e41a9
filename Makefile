# Kiln — build, run, test, bench. Every target sets up what it needs.
GO       ?= go
NPM      ?= npm
BIN      := bin
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -s -w -X main.version=$(VERSION)
ADDR     ?= 127.0.0.1:8420
# Thread search is SQLite's FTS5, which go-sqlite3 compiles in with the
# sqlite_fts5 build tag: every go command here (and the go commands the
# tests run) gets it. By hand: go build -tags sqlite_fts5 ./cmd/kiln.
# Without the tag (a plain go build or go install) kiln works with basic
# search (a scan, unranked); test-plain keeps that build working.
GOTAGS   := sqlite_fts5
export GOFLAGS := -tags=$(GOTAGS) $(GOFLAGS)
# CHROMIUM is the browser of the UI's end-to-end tests and of the first-paint figure.
CHROMIUM ?= /usr/bin/chromium
export CHROMIUM

# The web UI: TypeScript sources in web/ui, built by esbuild into web/ui/dist,
# which is committed and embedded in the binary (so Go alone builds kiln).
UI         := web/ui
UI_DIST    := $(UI)/dist/app.js
UI_MODULES := $(UI)/node_modules/.package-lock.json
UI_SRC     := $(shell find $(UI)/src 2>/dev/null) $(wildcard $(UI)/package.json $(UI)/package-lock.json $(UI)/build.mjs $(UI)/tsconfig.json)
# npm, when it is installed and web/ui has its build (package.json, build.mjs)
HAVE_NPM   := $(and $(wildcard $(UI)/package.json),$(wildcard $(UI)/build.mjs),$(shell command -v $(NPM) 2>/dev/null))

# The third-party MCP servers the plugins/mcp tests connect to
# (@modelcontextprotocol/server-everything and server-filesystem), from npm
# into plugins/mcp/testdata/npm; its node_modules is not committed.
MCP_NPM     := plugins/mcp/testdata/npm
MCP_MODULES := $(MCP_NPM)/node_modules/.package-lock.json
# OpenSandbox's JavaScript SDK, the sandbox API's real client in the tests.
SBX_NPM     := sandbox/testdata/npm
SBX_MODULES := $(SBX_NPM)/node_modules/.package-lock.json

.PHONY: all build kiln examples run image ui ui-check deps docker test test-plain test-short bench fuzz vet clean

all: build

## build: the kiln binary (server + CLI, with the web UI) and the example plugins into bin/
build: kiln examples

## kiln: the kiln binary and kiln-execd (the static in-sandbox agent docker sandboxes mount)
kiln: ui
	$(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/kiln ./cmd/kiln
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w" -o $(BIN)/kiln-execd ./cmd/kiln-execd

## examples: the calc example plugin in both runtimes, as folders `kiln plugin install` takes:
## bin/plugins/calc-wasm (WASM module) and bin/plugins/calc (process); and the bwrap sandbox
## runtime, a process plugin: bin/plugins/bwrap (then kiln settings set sandbox_runtime=bwrap makes it the default)
EXAMPLE := sdk/plugin/examples/calc
examples: kiln
	@mkdir -p $(BIN)/plugins/calc-wasm $(BIN)/plugins/calc $(BIN)/plugins/bwrap
	GOOS=wasip1 GOARCH=wasm CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w" -buildmode=c-shared -o $(BIN)/plugins/calc-wasm/calc.wasm ./$(EXAMPLE)
	$(GO) build -trimpath -ldflags "-s -w" -o $(BIN)/plugins/calc/calc ./$(EXAMPLE)
	$(GO) build -trimpath -ldflags "-s -w" -o $(BIN)/plugins/bwrap/kiln-sandbox-bwrap ./sandbox/bwrap/cmd/kiln-sandbox-bwrap
	cp $(EXAMPLE)/kiln-plugin.wasm.json $(BIN)/plugins/calc-wasm/kiln-plugin.json
	cp $(EXAMPLE)/kiln-plugin.process.json $(BIN)/plugins/calc/kiln-plugin.json
	cp sandbox/bwrap/kiln-plugin.process.json $(BIN)/plugins/bwrap/kiln-plugin.json
	$(BIN)/kiln plugin checksum --write $(BIN)/plugins/calc-wasm
	$(BIN)/kiln plugin checksum --write $(BIN)/plugins/calc
	$(BIN)/kiln plugin checksum --write $(BIN)/plugins/bwrap

## run: build and serve on 127.0.0.1 with the embedded defaults (~/.kiln, demo model)
run: kiln
	$(BIN)/kiln serve --addr $(ADDR)

## image: the container image $(IMAGE) (and kiln:latest) from scratch with the local Docker engine:
## a static kiln, CA certificates, the user kiln (10001), a /data volume and a health check (kiln ready)
IMAGE ?= kiln:$(VERSION)
image: ui docker
	cmd/kiln/image/build $(IMAGE) $(VERSION)
	docker tag $(IMAGE) kiln:latest

## ui: rebuild web/ui/dist when a source is newer than it (npm ci first when the lock file changed)
ifeq ($(HAVE_NPM),)
ui:
	@echo "note: $(if $(wildcard $(UI)/build.mjs),npm not found,no web/ui/build.mjs); kiln embeds the committed web/ui/dist as it is"
else
ui: $(UI_DIST)

$(UI_DIST): $(UI_SRC) | $(UI_MODULES)
	cd $(UI) && $(NPM) run --silent build
	@touch $@
endif

# npm ci writes node_modules/.package-lock.json; it is older than the lock
# file when package-lock.json changed since the last install.
$(UI_MODULES): $(UI)/package-lock.json
	cd $(UI) && $(NPM) ci --no-audit --no-fund --loglevel=error
	@touch $@

$(MCP_MODULES): $(MCP_NPM)/package-lock.json
	cd $(MCP_NPM) && $(NPM) ci --no-audit --no-fund --loglevel=error
	@touch $@

$(SBX_MODULES): $(SBX_NPM)/package-lock.json
	cd $(SBX_NPM) && $(NPM) ci --no-audit --no-fund --loglevel=error
	@touch $@

## ui-check: fail when web/ui/dist is not what a fresh build of the sources makes (and leave the fresh build)
ui-check: $(UI_MODULES)
	.ci/ui-check

## deps: install what the tests need when missing: Chromium, bubblewrap and PostgreSQL (apt, as root), the UI's npm packages,
## the MCP servers the plugins/mcp tests run, OpenSandbox's JS SDK, and the Docker engine and image (docker)
deps: docker
	.ci/setup
	@$(MAKE) --no-print-directory $(UI_MODULES)
	@$(MAKE) --no-print-directory $(MCP_MODULES)
	@$(MAKE) --no-print-directory $(SBX_MODULES)

## docker: install and start the Docker engine and build the image kiln-test/busybox when missing
## (as root; otherwise the Docker runtime's tests skip, unless KILN_REQUIRE_DOCKER=1)
docker:
	.ci/docker-up

## test: deps, the web/ui/dist check, vet, every Go test (including the end-to-end crash test, the
## Docker and bwrap runtimes' and the PostgreSQL Store's, which fail rather than skip without an
## engine, bwrap or PostgreSQL), the UI's unit tests and its browser tests against bin/kiln
test: export KILN_REQUIRE_DOCKER := 1
test: export KILN_REQUIRE_BWRAP := 1
test: export KILN_REQUIRE_POSTGRES := 1
test: export KILN_EXECD_BIN := $(CURDIR)/$(BIN)/kiln-execd
test: deps
	@$(MAKE) --no-print-directory ui-check
	@$(MAKE) --no-print-directory build
	$(GO) vet ./...
	@$(MAKE) --no-print-directory test-plain
	$(GO) test -count=1 -timeout 15m ./...
	cd $(UI) && $(NPM) test
	cd $(UI) && KILN_BIN=$(CURDIR)/$(BIN)/kiln $(NPM) run e2e

## test-plain: the build without the sqlite_fts5 tag, as `go install` makes it: vet everything, build,
## and the tests of the store, core and the HTTP API, whose searches then run in basic mode
test-plain:
	GOFLAGS= $(GO) vet ./...
	GOFLAGS= $(GO) build -o /dev/null ./cmd/kiln
	GOFLAGS= $(GO) test -count=1 ./core/... ./web/...

## test-short: the Go unit tests only
test-short:
	$(GO) test -count=1 -short ./...

vet:
	$(GO) vet ./...

## bench: the figures the issues ask for, as a table (LangGraph JS alongside and the UI's first paint when Node is present);
## deps first, as for test: the MCP benchmarks run the npm MCP servers, the sandbox figures the Docker
## engine and OpenSandbox's JS SDK, the first paint Chromium and the UI's node_modules
bench: deps
	@$(MAKE) --no-print-directory build
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
