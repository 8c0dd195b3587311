# Two commands set up a fresh machine and do the work:
#   make run    the main job: the calculator on the bundled data, then the course site
#   make test   the whole test suite
# Both bootstrap a virtual environment in .venv with the pinned stack first. `make run` needs no llama.cpp: only
# the tests and the engine experiments do, so only `make test` (and `make setup`) build it, once (see `llama`).

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
LIGHT  := $(VENV)/.light-done
CORE   := $(VENV)/.core-done
STAMP  := $(VENV)/.setup-done

# A portable llama.cpp build: a native one may not run on another machine.
GGML_FLAGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON

# Tools spawned by nbgrader/jupyter (alembic, kernels) come from the venv without activating it.
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: setup setup-core run test site notebooks llama llama-bench matmul-bench clean

# Everything the tests need: the Python stack, Chromium, Pyodide for the calculator page, llama.cpp.
setup: $(STAMP)

$(STAMP): $(CORE) requirements-llama.txt
	$(MAKE) --no-print-directory browser
	$(MAKE) --no-print-directory pyodide
	$(MAKE) --no-print-directory llama
	$(MAKE) --no-print-directory matmul-bench || echo "warning: matmul-bench did not build; E2 uses the saved kernel constants"
	touch $@

# The calculator alone: numpy at the version requirements.txt pins, and the package itself (seconds).
$(LIGHT): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -c requirements.txt numpy
	$(BIN)/pip install -q --no-deps -e .
	touch $@

# The Python stack without llama.cpp: the calculator, the lessons, the site generators, nbgrader.
setup-core: $(CORE)

$(CORE): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	# torch first, pinned: pip takes the local CPU build (an unpinned torch pulls CUDA).
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -r requirements.txt
	$(BIN)/pip install -q --no-deps --no-build-isolation -e .
	touch $@

# Debian's chromium for the site check (headless). Skipped when already on PATH.
.PHONY: browser
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "chromium is missing: install Debian's 'chromium' package (sudo apt-get install chromium)"; exit 1; fi; }

# The calculator's answer first (it needs only numpy), then the rest of the stack and the site.
run: $(LIGHT)
	$(BIN)/python tools/main_job.py calculator
	$(MAKE) --no-print-directory setup-core pyodide
	$(BIN)/python tools/main_job.py site

site: $(CORE) pyodide
	$(BIN)/python tools/build_site.py

test: setup
	$(BIN)/python -m pytest -q

# Regenerate solutions/ from the package source and exercises/ with real nbgrader.
notebooks: $(CORE)
	$(BIN)/python tools/make_notebooks.py

# llama.cpp, built ONCE for both of its users: one CMake build of the source vendored in the pinned
# llama-cpp-python sdist (PyPI), in a gitignored folder. pip builds and installs the Python package from that
# unpacked source with its CMake build folder kept at build/llama.cpp (scikit-build-core's build-dir); llama-bench
# (the E2 check) is then one more target of the same configured build, so nothing is compiled twice.
# LLAVA_BUILD=OFF: the course uses no multimodal model (llama_cpp loads libmtmd only for those), and llama.cpp's
# tools folder defines the same mtmd target. The UI and OpenSSL switches keep the build from downloading anything.
# Another llama.cpp tool or test: `$(MAKE) llama-target TARGET=name` (tests need LLAMA_CMAKE=-DLLAMA_BUILD_TESTS=ON).
# The libraries are shared ones, as llama_cpp loads them: $(LLAMA_BUILD)/bin/libggml*.so and libllama.so.
LLAMA_SRC   := build/llama.cpp-src
LLAMA_BUILD := build/llama.cpp
LLAMA_DONE  := $(VENV)/.llama-done
LLAMA_OFF   := -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
               -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF
llama: $(LLAMA_DONE)
llama-bench: $(LLAMA_BUILD)/bin/llama-bench

$(LLAMA_DONE): requirements-llama.txt $(CORE)
	# A machine set up before this target existed already has both: keep them rather than compile again.
	if $(BIN)/python -c "import llama_cpp" 2>/dev/null && test -x $(LLAMA_BUILD)/bin/llama-bench; then touch $@; exit 0; fi; \
	$(MAKE) --no-print-directory llama-build
	touch $@

.PHONY: llama-build
llama-build:
	rm -rf $(LLAMA_SRC) $(LLAMA_BUILD) && mkdir -p $(LLAMA_SRC)
	$(BIN)/pip download -q --no-binary :all: --no-deps -d $(LLAMA_SRC) -r requirements-llama.txt
	tar -xzf $(LLAMA_SRC)/llama_cpp_python-*.tar.gz -C $(LLAMA_SRC)
	# The generator is fixed here (Ninja if on PATH): a build tool pip fetched for the build would be gone later.
	CMAKE_GENERATOR="$$(command -v ninja >/dev/null && echo Ninja || echo "Unix Makefiles")" \
	CMAKE_ARGS="$(GGML_FLAGS) $(LLAMA_OFF)" CMAKE_BUILD_PARALLEL_LEVEL=2 $(BIN)/pip install -q \
	  --config-settings=build-dir=$(CURDIR)/$(LLAMA_BUILD) $$(ls -d $(LLAMA_SRC)/llama_cpp_python-*/)
	# llama-bench for the E2 check: without it E2 falls back to the Python-API method.
	$(MAKE) --no-print-directory llama-bench || echo "warning: llama-bench did not build; E2 uses the Python-API method"

$(LLAMA_BUILD)/bin/llama-bench:
	test -f $(LLAMA_BUILD)/CMakeCache.txt || $(MAKE) --no-print-directory llama-build
	$(MAKE) --no-print-directory llama-target TARGET=llama-bench LLAMA_CMAKE=-DLLAMA_BUILD_TOOLS=ON

# One more target of the same build (the libraries are already compiled: only the target's own files are).
.PHONY: llama-target
llama-target:
	cmake -S $$(ls -d $(LLAMA_SRC)/llama_cpp_python-*/) -B $(LLAMA_BUILD) -Wno-dev $(LLAMA_CMAKE) >/dev/null
	cmake --build $(LLAMA_BUILD) --target $(TARGET) -j2 >/dev/null

# Pyodide (CPython compiled to WebAssembly), for the calculator page: the official `pyodide` package from the npm
# registry (Python 3.14), sha512-pinned, unpacked into a gitignored folder; the site build copies it into the site
# (hooks/live_calculator.py), so the page reads nothing from elsewhere. No numpy: the calculator's plan path is
# plain Python. The page loads these files and nothing else of the package (about 13.5 MB).
PYODIDE_PKG    := pyodide@314.0.8
PYODIDE_SHA512 := ef85aad645ce0be08213301fc6e4403bbd359c070230b8dff0daf0bd6a6ef12e35755317c1798b434e5d601f85e1ee3a01d9c6a34a2aed81d2554a47b286ab2d
PYODIDE_FILES  := pyodide.js pyodide.asm.mjs pyodide.asm.wasm python_stdlib.zip pyodide-lock.json package.json
PYODIDE_DIR    := build/pyodide
.PHONY: pyodide
pyodide: $(PYODIDE_DIR)/.done-$(PYODIDE_PKG)

$(PYODIDE_DIR)/.done-$(PYODIDE_PKG):
	rm -rf $(PYODIDE_DIR) && mkdir -p $(PYODIDE_DIR)
	cd $(PYODIDE_DIR) && npm pack --silent $(PYODIDE_PKG) >/dev/null
	echo "$(PYODIDE_SHA512)  $$(ls $(PYODIDE_DIR)/*.tgz)" | sha512sum --check --quiet
	tar -xzf $(PYODIDE_DIR)/*.tgz -C $(PYODIDE_DIR) --strip-components=1 $(addprefix package/,$(PYODIDE_FILES))
	rm $(PYODIDE_DIR)/*.tgz
	touch $@

# matmul-bench: the speed model's kernel microbenchmark (part1_capacity/experiments/engine/matmul_bench.c, the project's own
# code) linked against the ggml libraries of the one llama.cpp build above (the shared ones llama_cpp and
# llama-bench load, same vendored source and flags), so it times exactly the kernels llama-bench runs.
# (test-backend-ops cannot: it pins half the CPUs' threads and never uses the repacking buffer.) Seconds to build
# once llama-bench is there. (A build from before the one-build set-up has static libraries: linked the same way.)
MATMUL_BENCH := $(LLAMA_BUILD)/bin/matmul-bench
matmul-bench: $(MATMUL_BENCH)

$(MATMUL_BENCH): part1_capacity/experiments/engine/matmul_bench.c $(LLAMA_BUILD)/bin/llama-bench
	$(CC) -O2 -std=gnu11 -I$$(ls -d $(LLAMA_SRC)/llama_cpp_python-*/vendor/llama.cpp)/ggml/include $< -o $@ \
	  $$(if [ -e $(LLAMA_BUILD)/bin/libggml.so ]; then echo '-L$(LLAMA_BUILD)/bin -lggml -lggml-cpu -lggml-base -Wl,-rpath,$$ORIGIN'; \
	     else echo '$(addprefix $(LLAMA_BUILD)/ggml/src/,libggml.a libggml-cpu.a libggml-base.a) -lstdc++ -fopenmp'; fi) \
	  -lm -lpthread

clean:
	rm -rf _build site/generated nbgrader_root
