# Two commands on a fresh machine: `make demo` and `make test`. Both create .venv first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
DEMO := out/demo

.PHONY: demo test lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# the CPU build of torch first (a plain `torch` requirement would pull a multi-GB CUDA build)
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[all,test]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/vocalgrad build --out $(DEMO) --n-test 8 --n-train 8
	$(VENV)/bin/vocalgrad verify $(DEMO)
	$(VENV)/bin/vocalgrad info $(DEMO)

test: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks
	$(PY) -m pytest -n 2 --durations=15 tests

bench: $(STAMP)
	$(PY) benchmarks/bench_build.py

clean:
	rm -rf $(VENV) out
