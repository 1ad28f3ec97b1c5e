# megane-jupyter-bridge. `make run` starts the bridge on its embedded demo
# tool server; `make test` runs the tests; `make check` is what CI runs.

GO        ?= go
# The Go toolchain every target builds and tests with: go.mod's toolchain
# line (go1.27.3), the one place it is written. Go 1.26.8's standard
# library has 12 vulnerabilities that reach the bridge's code (crypto/x509,
# net/http's HTTP/2, net/textproto, crypto/tls, html/template; `make vuln`);
# 1.27.3 has none. The go command fetches it from the module proxy on first
# use (76 MB, once per machine), here and for `go install` and the sdist's
# backend (which refuses an older Go). go.mod's go line stays at 1.26.8, so
# `GOTOOLCHAIN=local go test` on Go 1.26 still works; what is built and
# shipped uses the pin (make release-rehearsal checks every artifact).
GOTOOLCHAIN ?= $(shell sed -n 's/^toolchain \(go[0-9.]*\)$$/\1/p' go.mod)
export GOTOOLCHAIN
BIN       := bin/megane-jupyter-bridge
PORT      ?= 8765
FUZZTIME  ?= 10000x
# Analysers run with `go run tool@version`: built by the same toolchain as the
# code they read (a staticcheck built by another Go cannot load this one's
# standard library), and pinned here only.
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2
GOVULNCHECK ?= $(GO) run golang.org/x/vuln/cmd/govulncheck@v1.9.0
ACTIONLINT ?= $(GO) run github.com/rhysd/actionlint/cmd/actionlint@v1.7.12
# The Go vulnerability database govulncheck reads, offline: built by vulndb's
# own indexdb from the OSV files of golang.org/x/vulndb at this version (a
# snapshot, 5 November 2026; raise it to learn of newer reports), which the
# module proxy serves like any module. vuln.go.dev is not needed.
VULNDB_VERSION ?= v0.0.0-20261105234957-e22db6528018
VULNDB         := .cache/vulndb-$(VULNDB_VERSION)

.PHONY: release-rehearsal crlf-check reproducible sdist sdist-check twine-check recipe recipe-check links go-test-args build run test check lint fuzz fuzz-short bench abuse tidy-check clean wheels vuln go-version

# build (and so make run) uses the pinned Go when it can be had; on a first
# build without network it builds with the local Go (at or above go.mod's
# go line) and says in one line what that costs. Release builds (wheels,
# sdist, the workflows) keep the pin.
build:
	@if $(GO) version >/dev/null 2>&1; then \
		$(GO) build -buildvcs=auto -o $(BIN) ./cmd/megane-jupyter-bridge; \
	else \
		echo "make: the pinned Go ($(GOTOOLCHAIN)) cannot be fetched (no network?): building with the local $$(GOTOOLCHAIN=local $(GO) env GOVERSION), whose standard library has known vulnerabilities that reach the bridge (make vuln lists them once the pin can be fetched)" >&2; \
		GOTOOLCHAIN=local $(GO) build -buildvcs=auto -o $(BIN) ./cmd/megane-jupyter-bridge; \
	fi  # -buildvcs=auto: stamp the commit even where GOFLAGS turns it off

# One wheel per platform in DIST (README "Install"): the statically linked
# binary (CGO_ENABLED=0, -trimpath) and the Python package that registers it
# with jupyter-server-proxy; version = what the binary's `version` prints.
# `make wheels WHEEL_PLATFORMS=linux/amd64` builds only some.
WHEEL_PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64
DIST            ?= dist

wheels:
	$(GO) run ./cmd/internal/mkwheel -out $(DIST) $(WHEEL_PLATFORMS)

# The source distribution in DIST (megane_jupyter_bridge-<version>.tar.gz):
# the Go sources the binary needs, PKG-INFO, and a pyproject.toml whose
# in-tree backend builds the wheel with Go (README "Install"). Entry times
# are SOURCE_DATE_EPOCH's when it is set, else 1980-01-01.
sdist:
	$(GO) run ./cmd/internal/mkwheel -sdist -out $(DIST)

# The conda-forge recipe with the sdist's sha256 filled in, written to
# RECIPE_OUT (not into DIST, which is uploaded to PyPI whole).
RECIPE_OUT ?= bin/recipe.yaml
recipe:
	@mkdir -p $(dir $(RECIPE_OUT))
	@sdist=$$($(GO) run ./cmd/internal/mkwheel -sdist -out $(DIST)) && \
		$(GO) run ./cmd/internal/mkwheel -recipe recipe/recipe.yaml "$$sdist" > $(RECIPE_OUT).tmp && mv $(RECIPE_OUT).tmp $(RECIPE_OUT) && \
		echo "$(RECIPE_OUT): source $$(basename $$sdist), sha256 $$(sha256sum < $$sdist | cut -d' ' -f1)"

# The standalone token, kept across restarts (created with mode 0600 on the
# first run) beside the receipt key in Jupyter's data directory, found as
# jupyter_core finds it (a shell expression: evaluated when run starts).
TOKEN_FILE ?= $${JUPYTER_DATA_DIR:-$${XDG_DATA_HOME:-$$HOME/.local/share}/jupyter}/megane-jupyter-bridge/standalone.token

# Standalone mode (no Jupyter, no internet) with the demo tool server from
# etc/demo-servers.json; prints the URL to open. The token is read from
# TOKEN_FILE, never given on the command line (which every local user can read).
run: build
	PATH="$(abspath bin):$$PATH" ./$(BIN) serve --standalone --port $(PORT) --servers etc/demo-servers.json --token-file "$(TOKEN_FILE)"

test:
	$(GO) test -race -count=1 -timeout 25m ./...

# go test with the Makefile's toolchain and ARGS (.ci/lived-in.sh).
go-test-args:
	$(GO) test $(ARGS)

# The platforms the bridge is built for besides this one (README "Install"):
# make lint vets each, which compiles every package and test for it.
CROSS_PLATFORMS ?= linux/arm64 darwin/amd64 darwin/arm64 windows/amd64

# actionlint (ACTIONLINT above) checks both GitHub workflows, with
# shellcheck for their run: scripts when it is installed (.ci/run installs it).
lint:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...
	@set -e; for p in $(CROSS_PLATFORMS); do echo "GOOS=$${p%/*} GOARCH=$${p#*/} go vet ./..."; GOOS=$${p%/*} GOARCH=$${p#*/} $(GO) vet ./...; done
	$(STATICCHECK) ./...
	$(ACTIONLINT)
	sh .ci/package-docs.sh

tidy-check:
	cp go.mod /tmp/go.mod.check && cp go.sum /tmp/go.sum.check
	$(GO) mod tidy
	@if ! cmp -s go.mod /tmp/go.mod.check || ! cmp -s go.sum /tmp/go.sum.check; then \
		echo "go mod tidy changed go.mod/go.sum: run it and commit"; \
		cp /tmp/go.mod.check go.mod; cp /tmp/go.sum.check go.sum; exit 1; fi

# govulncheck against the database above: fails when a vulnerability reaches
# the code (a module or standard-library one that is only imported, never
# called, is listed but does not fail). The database is built once (about a
# minute) into .cache.
vuln:
	@if [ ! -f $(VULNDB)/index/db.json ]; then \
		src=$$($(GO) mod download -json golang.org/x/vulndb@$(VULNDB_VERSION) | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$$/\1/p'); \
		test -d "$$src/data/osv" || { echo "golang.org/x/vulndb@$(VULNDB_VERSION) has no data/osv"; exit 1; }; \
		rm -rf $(VULNDB).tmp && $(GO) run golang.org/x/vulndb/cmd/indexdb@$(VULNDB_VERSION) -vulns "$$src/data/osv" -out $(VULNDB).tmp && mv $(VULNDB).tmp $(VULNDB); \
	fi
	$(GOVULNCHECK) -db file://$(abspath $(VULNDB)) ./...

check: lint links tidy-check test fuzz-short vuln reproducible recipe-check release-rehearsal

# The documents' relative links and anchors (cmd/internal/mdlinks).
links:
	$(GO) run ./cmd/internal/mdlinks

# The tests that read the repository's own files (documents, go.mod, the
# recipe, the fixtures), in a clone made with core.autocrlf=true as GitHub's
# Windows runners make theirs: .gitattributes must keep every text file LF.
CRLF := .cache/crlf
crlf-check:
	rm -rf $(CRLF) && git -c core.autocrlf=true clone -q . $(CRLF)
	cd $(CRLF) && $(GO) test -count=1 ./cmd/internal/mkwheel ./cmd/internal/mdlinks ./jupyter/... && \
		$(GO) test -count=1 -run 'TestProtocolDocument|TestHostileCorpus' ./bridge && $(GO) run ./cmd/internal/mdlinks
	rm -rf $(CRLF)

# The Go that builds and tests (GOTOOLCHAIN above), fetched on first use.
go-version:
	@$(GO) version

# Every fuzz target, FUZZTIME each (a count by default; `make fuzz` runs 2 minutes each).
fuzz-short fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
		dir=$$($(GO) list -f '{{.Dir}}' $$pkg); \
		for f in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go 2>/dev/null | sed 's/^func //'); do \
			echo "fuzz $$pkg $$f"; \
			$(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) $$pkg; \
		done; \
	done

fuzz: FUZZTIME = 2m

# The comparison table (bridge vs. a direct go-sdk client vs. supergateway,
# the floor and the Jupyter hop, whose Go benchmarks the harness runs itself;
# cmd/internal/benchharness/README.md), then the other Go benchmarks
# (BenchmarkLoad: 50 tabs x 200 calls).
bench:
	$(GO) run ./cmd/internal/benchharness
	$(GO) test -run '^$$' -bench . -skip 'BenchmarkFloor|BenchmarkJupyterHop' -benchmem -count 1 -timeout 30m ./...

# The abuse tests (issue 12), heavy where they have a heavy version (20,000
# idle connections; CI runs 2,000; TestMixedAbuse for ABUSE_MIXED, 20 s in
# CI), as a table: attack, bound, measured.
ABUSE_MIXED ?= 5m
ABUSE_TESTS := TestIdleConnectionsDoNotLockOutPages|TestServerKillsItsKeeper|TestMixedAbuse|TestOrphanedBridgeExits|TestStrangerAtParentAddress|TestSpawnChurn|TestPendingConnectsBounded|TestHalfSentChunkReleased|TestChunkMemoryShared|TestSlowReadersBoundedInBytes|TestMemoryCeilingRefusesNewWork|TestTimeoutBeyondDuration|TestArgumentsNotText|TestUnparseableResultFailsAtOnce|TestServerTextNotUTF8|TestChattyServerKeepsItsPage|TestProgressPaced|TestStalledFramesBounded|TestEventStreamFieldsBounded|TestResultsInFlightBounded|TestStdioResultsShareTheBudget|TestCheckEscapesServerStrings|TestLabelsBoundedInLength|TestAuditFileRefusesWhatIsNotItsOwn|TestAuditLinesStayWhole|TestHugeLimitsServePages|TestMetricsPublicOnLoopback|TestCallsNeverWaitForTheCatalog|TestWatcherSlowPyKeepsLastGood
abuse:
	@MEGANE_ABUSE_PEAK=1 MEGANE_ABUSE_CONNS=20000 MEGANE_ABUSE_MIXED=$(ABUSE_MIXED) $(GO) test -count=1 -timeout 30m -run '^($(ABUSE_TESTS))$$' -v ./bridge ./cmd/megane-jupyter-bridge ./jupyter > bin/abuse.log 2>&1; status=$$?; \
	echo "| attack | bound | measured |"; echo "|---|---|---|"; \
	sed -n 's/.*abuse: \(.*\)/| \1 |/p' bin/abuse.log; \
	grep -E '^(--- FAIL|FAIL|ok)' bin/abuse.log; exit $$status

# The Linux wheel built twice, the second time with an empty build cache,
# must be the same bytes (issue 25): -trimpath, the commit stamped by
# mkwheel (-X main.commit, -buildvcs=false: see sdist-check), fixed zip
# times and file order.
REPRO := .cache/repro
reproducible:
	rm -rf $(REPRO) && mkdir -p $(REPRO)/gocache
	$(GO) run ./cmd/internal/mkwheel -out $(REPRO)/a linux/amd64 >/dev/null
	GOCACHE=$(abspath $(REPRO))/gocache $(GO) run ./cmd/internal/mkwheel -out $(REPRO)/b linux/amd64 >/dev/null
	@a=$$(ls $(REPRO)/a/*.whl) && b=$$(ls $(REPRO)/b/*.whl) && cmp "$$a" "$$b" && \
		echo "reproducible: $$(basename $$a) built twice (once with an empty build cache) is the same $$(wc -c < $$a) bytes, sha256 $$(sha256sum < $$a | cut -c1-16)…"
	rm -rf $(REPRO)

# The sdist (issue 25): built twice it is the same bytes; pip, offline and without build isolation,
# builds a wheel from it through its in-tree backend, which must be the
# same bytes as make wheels's for this machine; the backend's build_sdist
# run in the unpacked sdist gives the sdist again; both read back (mkwheel
# -verify: RECORD, PKG-INFO, pyproject.toml, tar owners and order).
SDIST_CHECK := .cache/sdist-check
WHEEL_BACKEND_PATH := jupyter/wheel/pep517
WHEEL_BACKEND := megane_build_backend
sdist-check:
	rm -rf $(SDIST_CHECK) && mkdir -p $(SDIST_CHECK)/src
	$(GO) run ./cmd/internal/mkwheel -sdist -out $(SDIST_CHECK)/a >/dev/null
	$(GO) run ./cmd/internal/mkwheel -sdist -out $(SDIST_CHECK)/b >/dev/null
	@a=$$(ls $(SDIST_CHECK)/a/*.tar.gz) && cmp "$$a" $(SDIST_CHECK)/b/$$(basename $$a) && \
		echo "sdist-check: $$(basename $$a) built twice is the same $$(wc -c < $$a) bytes, sha256 $$(sha256sum < $$a | cut -c1-16)…"
	tar -xzf $(SDIST_CHECK)/a/*.tar.gz -C $(SDIST_CHECK)/src
	python3 -m pip wheel --quiet --no-index --no-cache-dir --no-build-isolation --no-deps -w $(SDIST_CHECK)/pip $(SDIST_CHECK)/src/*/
	$(GO) run ./cmd/internal/mkwheel -out $(SDIST_CHECK)/git $$($(GO) env GOOS)/$$($(GO) env GOARCH) >/dev/null
	@w=$$(cd $(SDIST_CHECK)/git && ls *.whl) && cmp $(SDIST_CHECK)/pip/$$w $(SDIST_CHECK)/git/$$w && \
		echo "sdist-check: pip wheel from the sdist gave $$w, the same $$(wc -c < $(SDIST_CHECK)/git/$$w) bytes as make wheels"
	cd $(SDIST_CHECK)/src/* && python3 -c 'import sys; sys.path.insert(0, "$(WHEEL_BACKEND_PATH)"); import $(WHEEL_BACKEND) as b; b.build_sdist(sys.argv[1])' $(abspath $(SDIST_CHECK))/again >/dev/null
	@a=$$(ls $(SDIST_CHECK)/a/*.tar.gz) && cmp "$$a" $(SDIST_CHECK)/again/$$(basename $$a) && \
		echo "sdist-check: the backend's build_sdist in the unpacked sdist (no git) gives the same bytes again"
	$(GO) run ./cmd/internal/mkwheel -verify $(SDIST_CHECK)/a/*.tar.gz $(SDIST_CHECK)/pip/*.whl
	rm -rf $(SDIST_CHECK)

# twine check --strict (what PyPI's upload checks) on the Linux wheel and the
# sdist, with Debian 13's twine 6.1 in the chroot .ci/trixie-chroot.sh builds
# (Debian 12's twine 4.0.2 cannot read Metadata-Version 2.4).
twine-check:
	bash .ci/twine-check.sh

# Every step of the release workflow that can run off GitHub, as it runs
# there (.ci/release-rehearsal.sh; RELEASING.md): the five wheels and the
# sdist built twice and compared, twine check --strict on all of them with
# the publish step's twine, pip's build from the sdist, SHA256SUMS, the
# SBOMs and the recipe, and mkwheel -release: every binary built by
# go.mod's pinned Go, every linked module's licence in its wheel. About 5
# minutes with a warm module cache.
release-rehearsal:
	bash .ci/release-rehearsal.sh

# The conda-forge recipe (TestRecipe: the binary's version, the sdist's file
# name, the sha256's shape, the tests, the licence), then filled in from a
# real sdist: its sha256 line must be that sdist's.
RECIPE_CHECK := .cache/recipe-check
recipe-check:
	$(GO) test -count=1 -run '^(TestRecipe|TestFillRecipe)$$' ./cmd/internal/mkwheel
	rm -rf $(RECIPE_CHECK)
	$(MAKE) -s recipe DIST=$(RECIPE_CHECK) RECIPE_OUT=$(RECIPE_CHECK)/recipe.yaml
	@sdist=$$(ls $(RECIPE_CHECK)/*.tar.gz) && sum=$$(sha256sum < $$sdist | cut -d' ' -f1) && \
		grep -qx "  sha256: $$sum" $(RECIPE_CHECK)/recipe.yaml && \
		echo "recipe-check: make recipe filled in $$(basename $$sdist)'s sha256"
	rm -rf $(RECIPE_CHECK)

clean:
	rm -rf bin $(DIST)
