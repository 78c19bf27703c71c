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
# on the built-in corpus (no download) by a local coordinator and two
# workers (`mixtrain local`), then a sample from the checkpoint it leaves in
# checkpoints/demo.
demo: build
	rm -rf checkpoints/demo
	$(BUILD_DIR)/bin/mixtrain local examples/demo.yaml --workers 2 \
	  --summary-json $(BUILD_DIR)/demo-summary.json
	@echo "--- summary ($(BUILD_DIR)/demo-summary.json)"
	@cat $(BUILD_DIR)/demo-summary.json
	@echo "--- sample"
	$(BUILD_DIR)/bin/mixtrain sample checkpoints/demo --prompt "chapter one" \
	  --tokens 300 --temperature 0.8

bench: build
	bash bench/run_all.sh $(BUILD_DIR)

clean:
	rm -rf $(BUILD_DIR)
