# The README's commands. `make test` is what CI runs: it installs the Debian
# packages the build needs, configures a Release build and runs ctest.
BUILD_DIR ?= build
# The product's three binaries again, with AddressSanitizer and UBSan: the
# e2e service tests run them too (tests/e2e/sanitized_test.sh).
SANITIZE_DIR ?= build-sanitize
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: deps configure build sanitized test demo bench compose-check clean

deps:
	bash scripts/install-deps.sh

configure: deps
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=Release \
	  -DMIXTRAIN_SANITIZED_BIN_DIR=$(abspath $(SANITIZE_DIR))/bin $(CMAKE_FLAGS)

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

sanitized: deps
	cmake -S . -B $(SANITIZE_DIR) -DCMAKE_BUILD_TYPE=Release -DMIXTRAIN_SANITIZE=address,undefined \
	  -DMIXTRAIN_BUILD_TESTS=OFF -DMIXTRAIN_BUILD_BENCH=OFF -DMIXTRAIN_CUDA=OFF $(CMAKE_FLAGS)
	cmake --build $(SANITIZE_DIR) -j $(JOBS) --target mixtrain mixtrain-coordinator mixtrain-worker

test: build sanitized
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

# The docker-compose stack as a user runs it (scripts/compose-check.sh):
# needs a running Docker engine; installs docker.io, docker-compose and
# debootstrap first. `make test` runs it too when an engine answers.
compose-check:
	bash scripts/install-deps.sh --docker
	bash scripts/compose-check.sh

clean:
	rm -rf $(BUILD_DIR) $(SANITIZE_DIR)
