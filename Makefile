# Two commands for a new user: `make bench` and `make test`. Each creates .venv and installs what it needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
CORE_STAMP := $(VENV)/.core-installed
MODEL_STAMP := $(VENV)/.models-installed
RAY_STAMP := $(VENV)/.ray-installed
# The CPU build of torch (pip takes it from local disk on our machines); installed before the torch extra so that
# sentence-transformers does not pull a multi-GB CUDA build.
TORCH_SPEC ?= torch==2.13.0

.PHONY: bench test test-property test-ray test-models test-all test-wheel bench-llamacpp lint typecheck clean

# The library with its extras, and the evaluation package (benchmarks/ragtrim_bench: benchmarks by topic, started as
# `ragtrim-bench <topic> <name>`; results in benchmarks/results/<topic>/).
$(CORE_STAMP): pyproject.toml benchmarks/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev,hf,gemma,langchain,llamaindex,haystack,trafilatura,serve,fastcount]' -e './benchmarks[plots,gemma,peers]'
	touch $@

# Ray Data and its Arrow (the ray extra): only the Ray engine's tests and the scale benchmark need them.
$(RAY_STAMP): $(CORE_STAMP)
	$(BIN)/python -m pip install -q -e '.[ray]'
	touch $@

$(MODEL_STAMP): $(CORE_STAMP)
	$(BIN)/python -m pip install -q '$(TORCH_SPEC)'
	$(BIN)/python -m pip install -q -e '.[embeddings,torch,ko]' -e './benchmarks[peers-models]'
	touch $@

## The main job: token savings of the default pipeline on the example corpus (examples/, shipped in the package).
## Writes ./ragtrim-bench.json (git-ignored), so the tree stays clean; the committed reference run is
## benchmarks/results/examples/bench_examples.json.
bench: $(MODEL_STAMP)
	$(BIN)/ragtrim prepare
	HF_HUB_OFFLINE=1 $(BIN)/ragtrim bench

## llama.cpp on this CPU (docs/llamacpp.md): builds llama-cpp-python from source (once; 25 minutes on 2 busy cores),
## then sends the first LLAMACPP_QUESTIONS golden questions untrimmed and trimmed (20-40 s per question on 2 busy
## cores). Writes benchmarks/results/llamacpp/cpu_$(LLAMACPP_SCORER).json. Not part of `make bench` or `make test`.
LLAMACPP_QUESTIONS ?= 100
LLAMACPP_SCORER ?= auto
LLAMACPP_THREADS ?= 2
bench-llamacpp: $(MODEL_STAMP)
	CMAKE_ARGS="-DGGML_NATIVE=ON" CMAKE_BUILD_PARALLEL_LEVEL=2 MAKEFLAGS=-j2 $(BIN)/python -m pip install -q -e './benchmarks[llamacpp]'
	HF_HUB_OFFLINE=1 $(BIN)/ragtrim-bench llamacpp cpu --questions $(LLAMACPP_QUESTIONS) \
		--threads $(LLAMACPP_THREADS) --scorer $(LLAMACPP_SCORER)

## The default test run (no model loading, no Ray instance; < 10 minutes on 2 cores), with the docs: every Python block and example
## script under its extras (tests/test_doc_examples.py), the README's gateway example (tests/test_readme_gateway.py),
## every relative link, anchor and named results file (tests/test_doc_links.py).
test: $(CORE_STAMP)
	$(BIN)/python -m pytest -q

## The property tests (Hypothesis, marker property) with new cases each run: `make test` runs the same tests on a
## fixed set of cases (profile ci, tests/conftest.py), so CI is repeatable; this target looks for new failures (each
## prints the case and a `@reproduce_failure` line; add the case to the test as an explicit `@example`).
test-property: $(CORE_STAMP)
	$(BIN)/python -m pytest -q -m 'property and not model and not ray' --hypothesis-profile=explore

## The Ray engine's tests (marker ray; not in `make test`, whose budget a Ray instance's start-up on 2 cores would
## take): a Ray instance of 2 CPUs on free ports, the audit and index jobs on it against the local engine.
test-ray: $(RAY_STAMP)
	$(BIN)/python -m pytest -q -m ray tests/engines

## Tests that load real models (MiniLM embeddings, the Gemma 3 270M GGUF through transformers, kiwipiepy's Korean model).
test-models: $(MODEL_STAMP)
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -q -m model

test-all: test test-property test-ray test-models

## API reference generated from the docstrings (pdoc, dev extra) into docs/api/ (not committed: 8 MB of generated
## HTML; tests/test_api_docs.py builds it in `make test`, so CI fails when it stops building).
.PHONY: docs
docs: $(CORE_STAMP)
	$(BIN)/python docs/build_api.py -o docs/api
## The wheel as users get it: no evaluation code in it, the example requests in it, `ragtrim trim` and `ragtrim bench`
## working from a fresh venv (also part of `make test`).
test-wheel: $(CORE_STAMP)
	$(BIN)/python -m pytest -q tests/test_packaging.py

typecheck: $(CORE_STAMP)
	$(BIN)/mypy --strict ragtrim benchmarks/ragtrim_bench

lint: $(CORE_STAMP)
	$(BIN)/ruff check ragtrim tests benchmarks

clean:
	rm -rf $(VENV) build dist benchmarks/build *.egg-info benchmarks/*.egg-info .pytest_cache .mypy_cache .hypothesis
