# Two commands on a fresh machine: `make demo` and `make test`. Both create .venv first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
DEMO := out/demo
RUNS := out/runs
VG := $(VENV)/bin/vocalgrad

.PHONY: demo test lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# the CPU build of torch first (a plain `torch` requirement would pull a multi-GB CUDA build)
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[all,test]'
	touch $(STAMP)

demo: $(STAMP)
	$(VG) build --out $(DEMO) --n-test 8 --n-train 8
	$(VG) verify $(DEMO)
	$(VG) info $(DEMO)
	$(VG) eval $(DEMO) --listener baseline:random --out $(RUNS)/random
	$(VG) eval $(DEMO) --listener baseline:always-increase --out $(RUNS)/always-increase
	$(VG) eval $(DEMO) --listener baseline:ideal --controls reversed --out $(RUNS)/ideal
	$(VG) eval $(DEMO) --listener whisper:tiny.en --limit 270 --controls reversed --out $(RUNS)/whisper-tiny.en

test: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks
	$(PY) -m pytest -n 2 --durations=15 tests

bench: $(STAMP)
	$(PY) benchmarks/bench_build.py

clean:
	rm -rf $(VENV) out
