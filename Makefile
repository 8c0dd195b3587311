# Two commands set up a fresh machine and do the work:
#   make run    the main job: the calculator on the bundled data, then the course site
#   make test   the test suite (the long end-to-end runs: make test-long; CI runs both)
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

.PHONY: setup setup-core run test test-long site serve notebooks doctor clean

# Everything the tests need: the Python stack, Chromium, bubblewrap, CJK fonts, Pyodide for the calculator page,
# llama.cpp (compiled once per machine: see `llama`), matmul-bench.
# (Again after the stamp: the cached build it links to may have been cleared since.)
setup: $(STAMP)
	@$(MAKE) --no-print-directory llama matmul-bench classroom-deps

$(STAMP): $(CORE) requirements-llama.txt
	$(MAKE) --no-print-directory system-packages
	$(MAKE) --no-print-directory pyodide
	$(MAKE) --no-print-directory llama
	$(MAKE) --no-print-directory matmul-bench
	$(MAKE) --no-print-directory classroom-deps
	touch $@

# The calculator alone: the package itself, nothing else (its plan path is plain Python; seconds).
$(LIGHT): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
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

# Debian packages installed when missing, as root through apt. A package counts as there when its command is on
# PATH or dpkg lists it installed. $(1): package:command pairs; $(2): what a non-root user or a failed apt does.
APT_MISSING_SH = missing=; for pc in $(1); do p=$${pc%%:*}; c=$${pc\#*:}; \
	  { [ -n "$$c" ] && command -v $$c >/dev/null 2>&1; } || \
	  dpkg-query -W -f='$${db:Status-Status}' $$p 2>/dev/null | grep -qx installed || missing="$$missing $$p"; done
APT_INSTALL_SH = $(APT_MISSING_SH); \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then echo "installing Debian packages:$$missing"; \
	    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; } >/dev/null 2>&1 || $(2); \
	  else $(2); fi; fi

# What the tests use: chromium (the site check, headless), bubblewrap (bwrap: the grader's sandbox), fonts-noto-cjk
# (CJK text in the site's figures). Without root it names what to install and stops.
SYSTEM_PACKAGES := chromium:chromium bubblewrap:bwrap fonts-noto-cjk:
.PHONY: system-packages site-packages browser
system-packages:
	@$(call APT_INSTALL_SH,$(SYSTEM_PACKAGES),{ echo "missing Debian packages:$$missing -- install them \
	  (sudo apt-get install$$missing)"; exit 1; })

# What the site needs (`make run`): fonts-noto-cjk for the Korean edition's figures. Without it the main job goes on:
# tools/build_site.py builds the English site in a fallback font and says in one line what to install.
SITE_PACKAGES := fonts-noto-cjk:
site-packages:
	@$(call APT_INSTALL_SH,$(SITE_PACKAGES),{ [ "$$(id -u)" != 0 ] || echo "apt could not install$$missing: \
	  the site is built in English alone"; })
browser: system-packages

# The calculator's answer first (it needs nothing but Python), then the rest of the stack and the site.
run: $(LIGHT)
	$(BIN)/python tools/main_job.py calculator
	$(MAKE) --no-print-directory setup-core pyodide site-packages
	$(BIN)/python tools/main_job.py site
	@$(BIN)/python tools/main_job.py next

site: $(CORE) pyodide
	$(BIN)/python tools/build_site.py

# The built site on http://127.0.0.1:8080/ (tools/main_job.py's SERVE_PORT): the live calculator and the search need
# a server (a browser loads neither from a file:// address). Standard library only.
serve:
	@$(or $(wildcard $(BIN)/python),$(PYTHON)) tools/main_job.py serve

# The default suite on both cores (pytest-xdist: a module's tests on one worker), kept under 5 minutes on 2 cores;
# the slowest ten tests are listed at the end. It skips the long end-to-end runs (marked `long`), each naming the
# smoke test that stands in for it; `make test-long` runs them and saves tests/long_run.json. CI runs both.
test: setup
	$(BIN)/python -m pytest -q -n 2 --durations=10

test-long: setup
	$(BIN)/python -m pytest -q -n 2 --long -m long --durations=0

# What is installed and what is not, and which commands need which (seconds; needs no .venv).
doctor:
	@$(or $(wildcard $(BIN)/python),$(PYTHON)) -m course.machine.doctor

# Regenerate solutions/ from the package source and exercises/ with real nbgrader.
notebooks: $(CORE)
	$(BIN)/python tools/make_notebooks.py

# llama.cpp, compiled ONCE PER MACHINE, not per clone: one CMake build of the source vendored in the pinned
# llama-cpp-python sdist (PyPI) serves the Python package, llama-bench and matmul-bench's libraries. It lives in a
# cache outside the clone, one entry per key: the sdist's sha256, the CMake arguments and the C/C++ compilers'
# versions (everything that changes the binaries). An entry holds the unpacked source (src/), the CMake build
# folder (build/: scikit-build-core's build-dir, then llama-bench as one more target of it), the llama-cpp-python
# wheel pip built from it (wheel/) and matmul-bench per version of its source (build/matmul-bench/<sha>/). A clone
# links build/llama.cpp-src and build/llama.cpp to the entry and installs the wheel: a second clone compiles nothing.
# Entries are built under a lock (two clones at once build it once); `make clean-llama-cache` removes the cache.
# LLAVA_BUILD=OFF: the course uses no multimodal model (llama_cpp loads libmtmd only for those), and llama.cpp's
# tools folder defines the same mtmd target. The UI and OpenSSL switches keep the build from downloading anything.
# No llama-server: the emitted llama-server flags are checked against llama.cpp's own argument table
# (common/arg.cpp, the table `llama-server --help` prints), read from the vendored source; the server itself would
# add mtmd, cpp-httplib and the web UI (about 50k lines of C++) to the build.
# Another llama.cpp tool or test: `$(MAKE) llama-target TARGET=name` (tests need LLAMA_CMAKE=-DLLAMA_BUILD_TESTS=ON);
# it adds the target to the cached build, shared by every clone of this machine.
# The libraries are shared ones, as llama_cpp loads them: $(LLAMA_BUILD)/bin/libggml*.so and libllama.so.
LLAMA_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/inference-memory-course/llama
export LLAMA_CACHE
LLAMA_VERSION := $(shell sed -n 's/^llama-cpp-python==//p' requirements-llama.txt)
LLAMA_SDIST := $(LLAMA_CACHE)/sdist/llama_cpp_python-$(LLAMA_VERSION).tar.gz
LLAMA_SRC   := build/llama.cpp-src
LLAMA_BUILD := build/llama.cpp
LLAMA_DONE  := $(VENV)/.llama-done
LLAMA_OFF   := -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
               -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF
LLAMA_CMAKE_ARGS := $(GGML_FLAGS) $(LLAMA_OFF)
# The entry of this clone's settings: prints its folder (the sdist must be in the cache first).
LLAMA_KEY_SH = { echo "sdist sha256 $$(sha256sum $(LLAMA_SDIST) | cut -d' ' -f1)"; echo "cmake $(LLAMA_CMAKE_ARGS)"; \
                 echo "cc $$($(CC) --version | head -1)"; echo "c++ $$($(CXX) --version | head -1)"; }
LLAMA_ENTRY_SH = echo "$(LLAMA_CACHE)/$$($(LLAMA_KEY_SH) | sha256sum | cut -c1-16)"
# How long the one compile takes, measured (README): said before it starts.
LLAMA_BUILD_TIME := 8 min on 2 cores at load average 3, up to 40 min on a busy machine

.PHONY: llama llama-bench llama-entry llama-sdist clean-llama-cache print-llama-cache
llama-bench: llama

# The stamp stays only while the cached build it links to is there (`make clean-llama-cache` removes it).
llama:
	@test -x $(LLAMA_BUILD)/bin/llama-bench || rm -f $(LLAMA_DONE)
	@$(MAKE) --no-print-directory -s $(LLAMA_DONE)

# A clone set up before the cache existed has its own build folder with both: it is kept rather than compiled again.
# (Only the lines that call $(MAKE) run under `make -n`: the one that replaces build/ folders has none.)
LLAMA_OWN_SH = { [ -d $(LLAMA_BUILD) ] && [ ! -L $(LLAMA_BUILD) ] && test -x $(LLAMA_BUILD)/bin/llama-bench \
                 && $(BIN)/python -c "import llama_cpp" 2>/dev/null; }
$(LLAMA_DONE): requirements-llama.txt $(CORE)
	@$(LLAMA_OWN_SH) || $(MAKE) --no-print-directory llama-sdist
	@$(LLAMA_OWN_SH) || { entry=$$($(LLAMA_ENTRY_SH)) && mkdir -p $(LLAMA_CACHE) && \
	  flock $$entry.lock $(MAKE) --no-print-directory llama-entry ENTRY=$$entry; }
	@$(LLAMA_OWN_SH) || { \
	  if [ -L build ]; then echo "build/ is a link to $$(readlink -f build), another clone's: not relinking its llama.cpp"; \
	    exit 1; fi; \
	  entry=$$($(LLAMA_ENTRY_SH)) && rm -rf $(LLAMA_BUILD) $(LLAMA_SRC) && mkdir -p build && \
	  ln -s $$entry/build $(LLAMA_BUILD) && ln -s $$entry/src $(LLAMA_SRC) && \
	  $(BIN)/pip install -q $$entry/wheel/llama_cpp_python-$(LLAMA_VERSION)-*.whl && \
	  echo "llama.cpp: using the build in $$entry"; }
	@touch $@

# The pinned sdist, downloaded once into the cache (through a scratch folder: never a half-written file there).
llama-sdist:
	@test -f $(LLAMA_SDIST) || { tmp=$$(mktemp -d) && \
	  $(BIN)/pip download -q --no-binary :all: --no-deps -d $$tmp -r requirements-llama.txt && \
	  mkdir -p $(dir $(LLAMA_SDIST)) && mv $$tmp/$(notdir $(LLAMA_SDIST)) $(LLAMA_SDIST) && rm -rf $$tmp; }

# One cache entry, built when missing (run under its lock). `done` is written last: an entry without it is rebuilt.
# The generator is fixed (Ninja if on PATH): a build tool pip fetched for the build would be gone later.
llama-entry:
	@test -f $(ENTRY)/done || { \
	  echo "Compiling llama.cpp once for this machine (expected: $(LLAMA_BUILD_TIME)) into $(ENTRY)"; \
	  rm -rf $(ENTRY) && mkdir -p $(ENTRY)/src && $(LLAMA_KEY_SH) > $(ENTRY)/key.txt && \
	  tar -xzf $(LLAMA_SDIST) -C $(ENTRY)/src && \
	  CMAKE_GENERATOR="$$(command -v ninja >/dev/null && echo Ninja || echo "Unix Makefiles")" \
	  CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" CMAKE_BUILD_PARALLEL_LEVEL=2 $(BIN)/pip wheel -q --no-deps \
	    -w $(ENTRY)/wheel --config-settings=build-dir=$(ENTRY)/build $(ENTRY)/src/llama_cpp_python-$(LLAMA_VERSION) && \
	  if { cmake -S $(ENTRY)/src/llama_cpp_python-$(LLAMA_VERSION) -B $(ENTRY)/build -Wno-dev -DLLAMA_BUILD_TOOLS=ON && \
	       cmake --build $(ENTRY)/build --target llama-bench -j2; } > $(ENTRY)/llama-bench.log 2>&1; \
	  then touch $(ENTRY)/done; \
	  else tail -n 40 $(ENTRY)/llama-bench.log; echo "llama-bench did not build: $(ENTRY)/llama-bench.log"; false; fi; }

# One more target of the same (cached) build: only the target's own files are compiled. CMake is given the cache's
# real paths, never this clone's links: the build folder must not name a clone that may be deleted.
.PHONY: llama-target
llama-target: llama
	@b=$$(readlink -f $(LLAMA_BUILD)) && log=$$b/target-$(TARGET).log && flock $$(dirname $$b).lock sh -c "\
	  cmake -S $$(readlink -f $(LLAMA_SRC))/llama_cpp_python-$(LLAMA_VERSION) -B $$b -Wno-dev $(LLAMA_CMAKE) && \
	  cmake --build $$b --target $(TARGET) -j2" > $$log 2>&1 || { tail -n 40 $$log; false; }

# Every cached llama.cpp build of this machine, and this clone's links to it.
clean-llama-cache:
	rm -rf $(LLAMA_CACHE) $(MATMUL_BENCH) $(LLAMA_DONE)
	for d in $(LLAMA_BUILD) $(LLAMA_SRC); do if [ -L $$d ]; then rm $$d; fi; done

print-llama-cache:
	@echo $(LLAMA_CACHE)

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
	cd $(PYODIDE_DIR) && npm pack --loglevel=error $(PYODIDE_PKG) >/dev/null
	echo "$(PYODIDE_SHA512)  $$(ls $(PYODIDE_DIR)/*.tgz)" | sha512sum --check --quiet
	tar -xzf $(PYODIDE_DIR)/*.tgz -C $(PYODIDE_DIR) --strip-components=1 $(addprefix package/,$(PYODIDE_FILES))
	rm $(PYODIDE_DIR)/*.tgz
	touch $@

# The stamp above, as course/machine/doctor.py finds it (tests/house/test_doctor.py checks they agree).
.PHONY: print-pyodide-stamp
print-pyodide-stamp:
	@echo $(PYODIDE_DIR)/.done-$(PYODIDE_PKG)

# matmul-bench: the speed model's kernel microbenchmark (part1_capacity/experiments/engine/matmul_bench.c, the project's own
# code) linked against the ggml libraries of the one llama.cpp build above (the shared ones llama_cpp and
# llama-bench load, same vendored source and flags), so it times exactly the kernels llama-bench runs.
# (test-backend-ops cannot: it pins half the CPUs' threads and never uses the repacking buffer.) Seconds to build;
# kept in the llama.cpp build folder (the cache's) per sha256 of its source, so clones with different versions of
# it never share one; build/matmul-bench links to it.
MATMUL_BENCH := build/matmul-bench
.PHONY: matmul-bench
matmul-bench: llama
	@lib=$$(readlink -f $(LLAMA_BUILD)) && out=$$lib/matmul-bench/$$(sha256sum part1_capacity/experiments/engine/matmul_bench.c | cut -c1-16) && \
	{ test -x $$out/matmul-bench || { mkdir -p $$out && \
	  $(CC) -O2 -std=gnu11 -I$$(readlink -f $(LLAMA_SRC))/llama_cpp_python-$(LLAMA_VERSION)/vendor/llama.cpp/ggml/include \
	    part1_capacity/experiments/engine/matmul_bench.c -o $$out/matmul-bench.$$$$ -L$$lib/bin \
	    -lggml -lggml-cpu -lggml-base -Wl,-rpath,$$lib/bin -lm -lpthread && \
	  mv $$out/matmul-bench.$$$$ $$out/matmul-bench; }; } && ln -sfn $$out/matmul-bench $(MATMUL_BENCH)

clean:
	rm -rf _build site/generated nbgrader_root

# ---- A class on JupyterHub (site/instructors.md, "A class on JupyterHub") -------------------------------------------
# configurable-http-proxy, JupyterHub's proxy, from the npm registry into a gitignored folder; `make classroom` clones
# the course into build/classroom/course (the instructor's course root), registers every assignment there and starts
# the hub on 127.0.0.1:8000. CLASSROOM_PASSWORD is required; CLASSROOM_STUDENTS names the students (comma-separated).
# Run as root, the hub makes a system account for each student (their server runs as it; `userdel` them afterwards).
# `make classroom-round`: the whole round through the hub (release, fetch, submit, collect, grade, feedback, export,
# two screenshots), as root, apart from `make test` (about 2.5 minutes on 2 cores).
CHP_PKG := configurable-http-proxy@5.3.0
CHP_DIR := build/chp
.PHONY: classroom classroom-deps classroom-round
classroom-deps: $(CHP_DIR)/.done

# Its own package.json makes the folder npm's project, not `--prefix .`: with --prefix npm reads its global settings
# from that folder too and misses the machine's (npm's etc/npmrc: a registry mirror, a CA file).
$(CHP_DIR)/.done:
	rm -rf $(CHP_DIR) && mkdir -p $(CHP_DIR)
	cd $(CHP_DIR) && echo '{"private": true}' > package.json && \
	  npm install --loglevel=error --no-audit --no-fund $(CHP_PKG)
	touch $@

classroom: $(CORE) classroom-deps
	@test -n "$$CLASSROOM_PASSWORD" || { echo "CLASSROOM_PASSWORD: not set; allowed: any non-empty password"; exit 2; }
	test -d build/classroom/course || git clone -q . build/classroom/course
	cd build/classroom/course && COURSE_ROOT=$(CURDIR)/build/classroom/course PYTHONPATH=$(CURDIR)/build/classroom/course \
	  $(CURDIR)/$(BIN)/python -m course.classroom register
	$(BIN)/python -m jupyterhub -f classroom/jupyterhub_config.py

classroom-round: $(CORE) classroom-deps system-packages
	$(BIN)/python -m pytest -q -m hub_round tests/course/classroom/test_class_round.py

# mutation: mutation testing (mutmut, pinned in requirements-mutation.txt) of the modules whose numbers users act on
# and of every lesson's and exercise's checks — one module at a time, with the tests that cover it, each in its own
# scratch folder under _build/mutation/; writes results/mutation/REPORT.md (module, mutants, killed, survivors with
# their diffs and why each is equivalent). A benchmark-like job (hours on 2 cores), not part of `make test`.
# MODULES="sharding laws" runs only those (names in tools/mutation.py).
.PHONY: mutation
mutation: $(CORE)
	$(BIN)/pip install -q -r requirements-mutation.txt
	nice -n 15 $(BIN)/python tools/mutation.py $(MODULES)
