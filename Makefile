# Thin wrapper over CMake + Ninja. See README.md.
BUILD      ?= build
UNIT       ?= AUTO
ASAN_BUILD ?= build-asan
JOBS       ?= $(shell nproc)
PYTEST     := .venv/bin/pytest
FUZZ_SECONDS ?= 60
FUZZ_JOBS    ?= 1

.PHONY: all build asan deps run test unit integration bench bench-quick bench-static fuzz clean redis-suite

all: build

deps:
	@scripts/deps.sh build

build: deps
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBRISK_UNIT_TESTS=$(UNIT) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

asan:
	@cmake -S . -B $(ASAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DBRISK_SANITIZE=ON -DBRISK_UNIT_TESTS=$(UNIT) >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS)

# Serves www/ (and its CGI scripts) on http://127.0.0.1:8080/ and runs
# brisk-kv on 127.0.0.1:6379, until Ctrl-C.
run: build
	@scripts/run.sh $(BUILD)/bin

# Unit tests (ctest) and integration tests (pytest) against the optimised
# build and against an AddressSanitizer + UndefinedBehaviorSanitizer build.
# ASAN_INTEGRATION=no leaves out the second integration pass (the unit
# tests still run in both builds).
test:
	@scripts/deps.sh test --venv
	@$(MAKE) --no-print-directory build asan UNIT=ON
	cd $(BUILD) && ctest --output-on-failure
	cd $(ASAN_BUILD) && ctest --output-on-failure
	fuzz/run.sh --replay
	BRISK_BIN_DIR=$(CURDIR)/$(BUILD)/bin BRISK_BIN=$(CURDIR)/$(BUILD)/bin/brisk \
	  $(PYTEST) -q tests/integration
ifneq ($(ASAN_INTEGRATION),no)
	BRISK_BIN_DIR=$(CURDIR)/$(ASAN_BUILD)/bin BRISK_BIN=$(CURDIR)/$(ASAN_BUILD)/bin/brisk \
	  $(PYTEST) -q tests/integration
endif

# Every race side by side: bench/results/latest.md, latest.json, headline.md, charts.
bench: build
	bench/run.sh

# The same, 1 round of 2 s per race: under 5 minutes on 2 cores.
bench-quick: build
	bench/run.sh --quick

# The first static race alone (brisk vs nginx), bench/results/static.md.
bench-static: build
	@scripts/deps.sh bench
	bench/static.sh

# Redis 7.0.15's own test suite against brisk-kv and a real redis-server side
# by side: bench/results/redis-suite.md. SUITE_ARGS="--group core8" etc.
redis-suite: build
	@scripts/deps.sh test
	scripts/redis_suite.py $(SUITE_ARGS)

# libFuzzer targets (fuzz/), ASan+UBSan, each run FUZZ_SECONDS.
fuzz:
	@scripts/deps.sh fuzz
	fuzz/run.sh --seconds $(FUZZ_SECONDS) --jobs $(FUZZ_JOBS)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) build-fuzz
