# The two commands: `make test` and `make report`. Both install what is missing first.
BUILD ?= build
JOBS ?= 2
PYTHON ?= /usr/bin/python3

.PHONY: all build test report asan release clean deps-test deps-report

all: build

deps-test:
	@scripts/install-deps.sh test

deps-report:
	@scripts/install-deps.sh report

build: deps-test
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build $(BUILD) -j$(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

# The test suite once more under AddressSanitizer + UndefinedBehaviorSanitizer.
asan: deps-test
	cmake -S . -B $(BUILD)-asan -DCMAKE_BUILD_TYPE=Debug -DEXOMEM_SANITIZE=ON
	cmake --build $(BUILD)-asan -j$(JOBS)
	cd $(BUILD)-asan && ctest --output-on-failure -j$(JOBS)

# A Release (-O3) build with -Werror: gcc warns about more at -O3 (maybe-uninitialized,
# stringop-*), so CI builds it too; its test suite is run once more there.
release: deps-test
	cmake -S . -B $(BUILD)-release -DCMAKE_BUILD_TYPE=Release
	cmake --build $(BUILD)-release -j$(JOBS)
	cd $(BUILD)-release && ctest --output-on-failure -j$(JOBS)

# REPORT_ARGS: more bench/run.py options, e.g. the conformant Graph500 (64 keys at every
# scale; the report then takes hours; by default Graph500 gets half an hour):
#   make report REPORT_ARGS="--program-args bench_graph500=''"
report: deps-report build
	$(PYTHON) bench/run.py --build $(BUILD) --out report $(REPORT_ARGS)

clean:
	rm -rf $(BUILD) $(BUILD)-asan $(BUILD)-release report
