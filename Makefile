# tenferro_cuda developer targets.
#
# CPU machine (no GPU):  make test | lint | typecheck | demo    (use the .venv)
# GPU host (no network): make gpu-test | bench | precompile     (system python3 +
#                        tools/gpu_env.sh: wheels from .whl/ in /tmp/site, PYTHONPATH)

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

PYTHON ?= python3
VENV := .venv
VENV_PY := $(VENV)/bin/python
PY ?= $(VENV_PY)
GPU_PY ?= python3
export GPU_PY
STAMP := $(VENV)/.installed
GPU_ENV := . tools/gpu_env.sh

.PHONY: venv test lint typecheck demo gpu-test bench precompile gpu-env clean

venv: $(STAMP)

# Re-install only when the project metadata changes.
$(STAMP): pyproject.toml setup.py
	@test -x $(VENV_PY) || $(PYTHON) -m venv $(VENV)
	$(VENV_PY) -m pip install -q --upgrade pip
	$(VENV_PY) -m pip install -q -e '.[test,dev]'
	@touch $@

test: venv
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -q tests

lint: venv
	$(VENV)/bin/ruff check .

typecheck: venv
	$(VENV)/bin/mypy tenferro_cuda

demo: venv
	$(PY) -m tenferro_cuda

# GPU_TEST_ARGS, e.g. "tests/gpu -n 8 --dist loadfile -p no:benchmark" with pytest-xdist
# (pytest-benchmark, where installed, refuses to run beside xdist unless disabled)
GPU_TEST_ARGS ?= tests
gpu-test:
	$(GPU_ENV) && $(GPU_PY) -m pytest -q $(GPU_TEST_ARGS)

bench:
	$(GPU_ENV) && $(GPU_PY) tools/bench.py && $(GPU_PY) tools/bench_report.py

precompile:
	$(GPU_ENV) && $(GPU_PY) tools/precompile.py --arch 90

gpu-env:
	@echo '. tools/gpu_env.sh   # = $(GPU_PY) -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$$PWD'

clean:
	rm -rf build dist *.egg-info .pytest_cache .ruff_cache .mypy_cache .hypothesis
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +
