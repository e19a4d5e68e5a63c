# Everything runs from a virtual environment the Makefile creates; only python3 is needed.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: demo test test-quick test-long bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

## demo: generate the bundle for a shipped DGX H100 with the inference profile into out/
demo: $(STAMP)
	$(BIN)/gen --hw dgx-h100 --profile inference -o out/dgx-h100-inference

## test: the whole test suite (what CI runs)
test: $(STAMP)
	$(BIN)/python -m pytest

## test-quick: the suite without the boot tests (-m boot: QEMU, several minutes), for a quick
## local run; CI still runs `make test`, boot tests included
test-quick: $(STAMP)
	$(BIN)/python -m pytest -m 'not boot'

## test-long: the property tests with 1,000 examples each
test-long: $(STAMP)
	$(BIN)/python -m pytest --hypothesis-profile=long tests/test_properties.py tests/test_hostile_fuzz.py

## bench: print the performance figures beside issue 17's goals (bench/bench.py; no timed
## assertions in the tests). Options go in BENCH_ARGS, e.g. BENCH_ARGS="--scratch /dev/shm --runs 21"
BENCH_ARGS ?=
bench: $(STAMP)
	$(BIN)/python bench/bench.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) out/*-*/
