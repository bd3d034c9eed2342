# Every target works from a fresh clone: `make install` creates .venv and installs cer with its dev tools,
# then compiles the numba kernels into numba's cache (tests/warm_kernels.py: ~1 minute, once).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: install test test-spark test-slow lint bench demo samples clean

$(BIN)/cer: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev,spark]'
	$(BIN)/python -m tests.warm_kernels
	@touch $(BIN)/cer

# Byte-compiled once here, as pip does for a regular install: an editable one has no .pyc,
# and where PYTHONDONTWRITEBYTECODE is set (this machine) every run compiled cer's ~100
# modules again, ~0.09 s of each run's start (0.41-0.50 s -> 0.32-0.40 s on samples/fig1.csv).
install: $(BIN)/cer
	$(BIN)/python -m compileall -q cer_cli

# The default run, on every core (pytest-xdist): all but Spark's tests and the long explorations.
test: install
	$(BIN)/pytest -n auto

# Spark's tests, one at a time: each starts a JVM that uses every core.
test-spark: install
	$(BIN)/pytest -m spark

test-slow: install
	$(BIN)/pytest -m slow

lint: install
	$(BIN)/ruff check cer_cli tests

bench: install
	$(BIN)/pytest -m bench -s tests/bench

demo: install
	$(BIN)/cer match queries/phi1.cel samples/fig1.csv --format table

samples: install
	$(BIN)/python samples/make_samples.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
