# Two entry points, each self-contained on a fresh machine with Python 3.11:
#   make demo   trains rnnencdec_small and rnnsearch_small on the synthetic corpus and prints
#               their BLEU by source length, the fixed vector against attention (`zoo demo`)
#   make test   runs the test suite on the tensorflow, jax and torch backends
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test venv clean

venv: $(STAMP)

# torch==2.13.0 first: it is a CPU build on local disk; an unpinned torch
# would pull a CUDA build of several GB.
# [tensorflow]: the extra that `zoo demo` trains with; [dev]: jax, torch, pytest.
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet "torch==2.13.0"
	$(PY) -m pip install --quiet -e ".[tensorflow,dev]"
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/zoo demo

test: $(STAMP)
	$(PY) tests/run_all.py

clean:
	rm -rf $(VENV) build *.egg-info
