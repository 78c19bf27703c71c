# The README's commands. `make test` is what CI runs: it installs the Debian
# packages the build needs, configures a Release build and runs ctest.
BUILD_DIR ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: deps configure build test demo bench clean

deps:
	bash scripts/install-deps.sh

configure: deps
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure --timeout 1800

# The README demo: a small GPT trained with mixed precision and ZeRO stage 1
# on the built-in corpus (no download), then a sample from it. Until the
# coordinator lands its two workers are two local ranks (`mixtrain train`).
demo: build
	rm -rf $(BUILD_DIR)/demo-checkpoints
	$(BUILD_DIR)/bin/mixtrain train examples/demo.yaml \
	  --set checkpoint.dir=$(BUILD_DIR)/demo-checkpoints --summary-json $(BUILD_DIR)/demo-summary.json
	@echo "--- summary ($(BUILD_DIR)/demo-summary.json)"
	@cat $(BUILD_DIR)/demo-summary.json
	@echo "--- sample"
	$(BUILD_DIR)/bin/mixtrain sample $(BUILD_DIR)/demo-checkpoints --prompt "chapter one" \
	  --tokens 300 --temperature 0.8

bench: build
	bash bench/run_all.sh $(BUILD_DIR)

clean:
	rm -rf $(BUILD_DIR)
