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

.PHONY: setup run test site notebooks llama-bench clean

setup: $(STAMP)

$(STAMP): requirements.txt requirements-llama.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	# torch first, pinned: pip takes the local CPU build (an unpinned torch pulls CUDA).
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -r requirements.txt
	CMAKE_ARGS="$(GGML_FLAGS)" CMAKE_BUILD_PARALLEL_LEVEL=2 $(BIN)/pip install -q -r requirements-llama.txt
	$(BIN)/pip install -q --no-deps --no-build-isolation -e .
	$(MAKE) --no-print-directory browser
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

clean:
	rm -rf _build site/generated nbgrader_root
