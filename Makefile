# ctlkit: two commands to know.
#   make lab    create .venv (once), install the kit, open JupyterLab on the notebooks
#   make test   create .venv (once), install the kit, run every test in quick mode
# Needs only python3 (3.10+) and make. Override with e.g. `make test PYTHON=python3.12 VENV=/tmp/venv`.

PYTHON ?= python3
VENV ?= .venv

VPY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.DEFAULT_GOAL := help
.PHONY: help lab test normalize clean distclean

help:
	@echo "make lab        install into $(VENV) if needed, then open JupyterLab on notebooks/"
	@echo "make test       install into $(VENV) if needed, then run all tests (quick mode)"
	@echo "make normalize  strip outputs and metadata from notebooks/ in place"
	@echo "make clean      remove caches, build leftovers and notebooks/runs (keeps $(VENV))"
	@echo "make distclean  clean, and remove $(VENV) too"

# The venv's python. A half-made venv (e.g. python3-venv missing) is removed so the next run retries.
$(VPY):
	$(PYTHON) -m venv $(VENV) || { rm -rf $(VENV); exit 1; }

# Reinstall only when pyproject.toml changed since the last successful install.
$(STAMP): pyproject.toml | $(VPY)
	$(VPY) -m pip install --upgrade pip
	$(VPY) -m pip install -e ".[dev]"
	touch $(STAMP)

# Token auth stays on: open the URL with ?token=... that JupyterLab prints.
# As root (containers), jupyter refuses to start without --allow-root.
lab: $(STAMP)
	$(VENV)/bin/jupyter lab notebooks/ --ip=127.0.0.1 $(if $(filter 0,$(shell id -u)),--allow-root)

# One shell, every step chained with &&: the first failing step fails `make test`.
# CTLKIT_QUICK=1 caps epochs, steps and data sizes inside ctlkit (DESIGN.md section 4).
test: $(STAMP)
	export CTLKIT_QUICK=1 MPLBACKEND=Agg TF_CPP_MIN_LOG_LEVEL=2 \
	       PATH="$(abspath $(VENV))/bin:$$PATH" && \
	$(VPY) tools/nbnorm.py --check notebooks && \
	$(VPY) -m pytest tests/ -q && \
	$(VPY) -m pytest --nbval-lax --nbval-current-env notebooks/ -q -p no:cacheprovider

# stdlib only: no venv needed
normalize:
	$(PYTHON) tools/nbnorm.py notebooks

clean:
	find . -path './$(VENV)' -prune -o -type d \( -name __pycache__ -o -name .pytest_cache -o -name .ipynb_checkpoints \) \
	    -prune -exec rm -rf {} +
	rm -rf build dist *.egg-info notebooks/runs

distclean: clean
	rm -rf $(VENV)
