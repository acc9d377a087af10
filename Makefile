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
	# compile librosa's numba kernels once, before parallel workers could race on its cache
	$(PY) -m vocalgrad.jit
	touch $(STAMP)

demo: $(STAMP)
	# 1. benchmarks from the builtin speech: the published tiers, and a magnitude sweep
	$(VG) build --out $(DEMO)/tiers --n-test 8 --n-train 8
	$(VG) build --out $(DEMO)/sweep --design psychometric --n-test 2 --n-train 0 --no-constant --no-audit
	$(VG) verify $(DEMO)/tiers
	$(VG) info $(DEMO)/tiers
	# 1b. the same sources and magnitudes as comparison items (two held parts) and recognition items (one held clip)
	$(VG) build --out $(DEMO)/comparison --format comparison --n-test 8 --n-train 8
	$(VG) build --out $(DEMO)/recognition --format recognition --n-test 8 --n-train 8
	# 2. listeners: chance, pure bias, the acoustic ceiling, the shortcut audit, and Whisper tiny.en
	$(VG) eval $(DEMO)/tiers --listener baseline:random --out $(RUNS)/random
	$(VG) eval $(DEMO)/tiers --listener baseline:always-increase --out $(RUNS)/always-increase
	$(VG) eval $(DEMO)/tiers --listener baseline:ideal --controls reversed --out $(RUNS)/ideal
	$(VG) eval $(DEMO)/tiers --listener baseline:shortcut --out $(RUNS)/shortcut
	$(VG) eval $(DEMO)/tiers --listener whisper:tiny.en --limit 270 --controls reversed --out $(RUNS)/whisper
	$(VG) eval $(DEMO)/sweep --listener baseline:ideal --out $(RUNS)/sweep-ideal
	$(VG) eval $(DEMO)/sweep --listener whisper:tiny.en --out $(RUNS)/sweep-whisper
	# 2b. one question in three formats: chance, the ideal observer and Whisper (its trimmed encoder
	#     context, 7x faster: the padded default is the one to report, see README)
	for f in comparison recognition; do \
		$(VG) eval $(DEMO)/$$f --listener baseline:random --out $(RUNS)/random-$$f && \
		$(VG) eval $(DEMO)/$$f --listener baseline:ideal --out $(RUNS)/ideal-$$f || exit 1; \
	done
	for f in tiers comparison recognition; do \
		$(VG) eval $(DEMO)/$$f --listener whisper:tiny.en+trimmed --limit 270 --out $(RUNS)/whisper-trimmed-$$f || exit 1; \
	done
	# 3. inside Whisper: layer-wise probes with controls, lens readout, diagnosis
	$(VG) build --out $(DEMO)/probe-set --n-test 4 --n-train 4 --tiers high --curves linear,jump --categories volume,voice_pitch --no-audit
	$(VG) probe $(DEMO)/probe-set --listener whisper:tiny.en --out $(DEMO)/probe
	# 4. one self-contained report
	$(VG) report $(RUNS)/random $(RUNS)/always-increase $(RUNS)/ideal $(RUNS)/shortcut $(RUNS)/whisper \
		$(RUNS)/sweep-ideal $(RUNS)/sweep-whisper \
		$(RUNS)/random-comparison $(RUNS)/random-recognition $(RUNS)/ideal-comparison $(RUNS)/ideal-recognition \
		$(RUNS)/whisper-trimmed-tiers $(RUNS)/whisper-trimmed-comparison $(RUNS)/whisper-trimmed-recognition --dataset $(DEMO)/tiers --probe $(DEMO)/probe --out $(DEMO)/report.html
	@echo "demo finished: open $(DEMO)/report.html"

test: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks
	$(PY) -m pytest -n 2 --durations=15 tests

bench: $(STAMP)
	$(PY) benchmarks/bench_build.py
	$(PY) benchmarks/bench_eval.py
	$(PY) benchmarks/bench_probe.py

clean:
	rm -rf $(VENV) out
