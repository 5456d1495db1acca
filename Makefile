# ctlkit: two commands to know.
#   make lab    create .venv (once), install the kit, open JupyterLab on the notebooks
#   make test   every test (quick mode) on every stack of the stack matrix, each in its own venv
# Needs only python3 (3.10+) and make: a stack whose Python is not here is named, with the line that
# gets it, and skipped (under CI=true it fails). One stack: `make test STACK=colab` (README, "Stacks").
# Override e.g. `make test STACK=current PYTHON=python3.12 VENV=/tmp/venv`.
# Knobs for the notebooks (README, "Any seed, full mode, a busy machine"):
#   MODE=full     notebooks in full mode (CTLKIT_QUICK=0), as learners run them; default quick
#   SEED=N        the run seed (CTLKIT_SEED=N): every random choice in every notebook changes
#   HOG=1         keep one core busy with a spinning process while the notebooks run
#   WHAT=notebooks  only the notebooks (not the unit tests); default all
#   JOBS=N        tests run N at a time (default 2, one per core of the CI machine); JOBS=1: one by one
#   EMULATE_TF32=1  the notebooks round float32 matmul/convolution inputs as an Ampere GPU does with
#                 TF32 on (CTLKIT_EMULATE_TF32, ctlkit/tf32.py): the A100/L4 path, checked on a CPU;
#                 EMULATE_TF32=force rounds where a notebook turned TF32 off too (the error it avoids)
#   make sweep SEEDS="1 2 3 4 5" [MODE=full] [HOG=1] [KEEP=1]: notebooks under each seed, failures by
#                 seed; KEEP=1 keeps each executed copy (the numbers it printed) in build/sweep/

PYTHON ?= python3
STACKS := current colab oldest
STACK ?= all
MODE ?= quick
WHAT ?= all
SEED ?=
HOG ?=
SEEDS ?= 1 2 3 4 5
JOBS ?= 2
ifeq ($(filter $(MODE),quick full),)
$(error MODE must be quick or full; got '$(MODE)')
endif
ifeq ($(filter $(WHAT),all notebooks),)
$(error WHAT must be all or notebooks; got '$(WHAT)')
endif
ifneq ($(SEED),)
ifneq ($(shell echo '$(SEED)' | grep -Ex '[0-9]{1,7}'),$(SEED))
$(error SEED must be a whole number from 0 to 1000000 (the run seed, CTLKIT_SEED); got '$(SEED)')
endif
endif
ifneq ($(EMULATE_TF32),)
ifeq ($(filter 1 force,$(EMULATE_TF32)),)
$(error EMULATE_TF32 must be 1 (TF32's rounding while the switch is on) or force (always); got '$(EMULATE_TF32)')
endif
endif
ifneq ($(shell echo '$(JOBS)' | grep -Ex '[1-9][0-9]?'),$(JOBS))
$(error JOBS must be a whole number from 1 to 99 (tests run that many at a time); got '$(JOBS)')
endif
IN_CI := $(filter true 1 yes,$(CI))

# Per stack: its venv, its constraints file (stacks/<name>.txt; none for current) and its environment.
# colab also runs with oneDNN off: what a CPU without oneDNN (e.g. Apple silicon) sees.
VENV_current := .venv
VENV_colab := .venv-colab
VENV_oldest := .venv-oldest
ENV_colab := TF_ENABLE_ONEDNN_OPTS=0
ENV_oldest :=
ENV_current :=

ONE := $(if $(filter all,$(STACK)),current,$(STACK))
ifeq ($(filter $(ONE),$(STACKS)),)
$(error STACK must be one of: all $(STACKS); got '$(STACK)')
endif
VENV ?= $(VENV_$(ONE))
CONSTRAINTS := $(wildcard stacks/$(ONE).txt)
# A pinned stack is built with the Python its pins were taken on (the file's "# python: 3.13" line):
# found on PATH, else in pyenv's versions folder. PYTHON=... on the command line overrides it.
PYVER := $(if $(CONSTRAINTS),$(shell sed -n 's/^\# python: *//p' $(CONSTRAINTS)))
ifneq ($(PYVER),)
ifneq ($(origin PYTHON),command line)
PYTHON := $(firstword $(foreach p,$(shell command -v python$(PYVER)) \
    $(wildcard $(or $(PYENV_ROOT),$(HOME)/.pyenv)/versions/$(PYVER).*/bin/python$(PYVER)) \
    /usr/bin/python$(PYVER),$(shell "$(p)" -c 'print("$(p)")' 2>/dev/null)) \
    missing-python$(PYVER))
endif
endif
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.DEFAULT_GOAL := help
.PHONY: help lab venv test test-one has-python sweep bench book normalize clean distclean

help:
	@echo "make lab                open JupyterLab on notebooks/ (installs into $(VENV_current) if needed)"
	@echo "make test               all tests (quick mode) on every stack: $(STACKS)"
	@echo "make test STACK=colab   all tests on one stack, in its own venv (.venv-<stack>)"
	@echo "make test MODE=full     notebooks in full mode (as learners run them); SEED=N: another run seed;"
	@echo "                        HOG=1: one core kept busy; WHAT=notebooks: skip the unit tests;"
	@echo "                        EMULATE_TF32=1: float32 matmuls rounded as an A100's TF32 does"
	@echo "make sweep SEEDS=\"1 2 3\" the notebooks under each seed (MODE, HOG, STACK as above);"
	@echo "                        prints every failing cell with the seeds that broke it; KEEP=1 keeps"
	@echo "                        the executed notebooks (tools/spreads.py: each number's range)"
	@echo "make bench              run notebook 12 (the benchmark) headless, full mode (QUICK=1: quick);"
	@echo "                        the executed copy and a .md with every number go to notebooks/runs/"
	@echo "make book               the book: executed notebooks as a static site, English and Chinese,"
	@echo "                        in build/book/ (runs only notebooks changed since their last full run)"
	@echo "make normalize          strip outputs and metadata from notebooks/ in place"
	@echo "make clean              remove caches, build leftovers and notebooks/runs (keeps the venvs)"
	@echo "make distclean          clean, and remove the venvs too"

# The venv's python. A half-made venv (e.g. python3-venv missing) is removed so the next run retries.
$(VPY):
	@command -v $(PYTHON) >/dev/null || { echo "$(GET_PYTHON)"; exit 1; }
	$(PYTHON) -m venv $(VENV) || { rm -rf $(VENV); exit 1; }

GET_PYTHON := stack $(ONE) needs Python $(PYVER) (its pins in $(CONSTRAINTS) were taken there); get it \
with one line: pyenv install $(PYVER) (or: uv python install $(PYVER)), or pass PYTHON=/path/to/python$(PYVER)

# Exit 0 when this stack can run here: its venv exists or its Python is found.
has-python:
	@test -x $(VPY) || command -v $(PYTHON) >/dev/null || { echo "== $(GET_PYTHON)"; exit 1; }

# Reinstall only when pyproject.toml or the stack's pins changed since the last successful install.
$(STAMP): pyproject.toml $(CONSTRAINTS) | $(VPY)
	$(VPY) -m pip install -q --upgrade pip
	$(VPY) -m pip install -e ".[dev,lab]" $(if $(CONSTRAINTS),-c $(CONSTRAINTS))
	$(VPY) -m pip check
	touch $(STAMP)

# Only the install (.ci/run installs the three stacks at once, then tests them in turn).
venv: $(STAMP)

# Token auth stays on: open the URL with ?token=... that JupyterLab prints.
# As root (containers), jupyter refuses to start without --allow-root.
lab: $(STAMP)
	$(VENV)/bin/jupyter lab notebooks/ --ip=127.0.0.1 $(if $(filter 0,$(shell id -u)),--allow-root)

# STACK=all runs each stack in turn and stops at the first that fails; the time per stack is printed.
# A stack whose Python is missing is named with the line that gets it and skipped, unless under CI
# (CI=true), where it fails: CI must run every stack.
ifeq ($(STACK),all)
test:
	@ran=""; missing=""; \
	for s in $(STACKS); do \
	    if ! $(MAKE) --no-print-directory -s has-python STACK=$$s 2>/dev/null; then \
	        $(if $(IN_CI),echo "== CI=true: every stack must run; stack $$s cannot"; exit 1;) \
	        missing="$$missing $$s"; continue; \
	    fi; \
	    start=$$(date +%s); \
	    $(MAKE) --no-print-directory test STACK=$$s || exit 1; \
	    echo "== stack $$s passed in $$(( $$(date +%s) - start )) s"; ran="$$ran $$s"; \
	done; \
	echo "== stacks passed:$$ran$(if $(filter full,$(MODE)), (full mode))"; \
	if [ -n "$$missing" ]; then echo "== stacks not run here, for want of their Python (see above):$$missing"; fi
else
test: test-one
endif

# Tests that do not depend on the venv they run in run once per matrix, on `current`: the Colab
# install resolution runs pip with Colab's own Python against both pinned stacks whatever venv runs it.
ONCE_colab := --deselect tests/test_packaging.py::test_installing_the_kit_on_colab_adds_only_the_kit
# The MNIST branches of 07 and 09 (tests/test_mnist_branches.py, minutes of CPU) run on one stack too.
ONCE_oldest := $(ONCE_colab) --deselect tests/test_mnist_branches.py
ONCE_colab += --deselect tests/test_mnist_branches.py

# One shell, every step chained with &&: the first failing step fails `make test`. The checks that
# need no TensorFlow run first: the notebooks normalised, `ruff check` ([tool.ruff] in pyproject.toml).
# CTLKIT_QUICK=1 caps epochs, steps and data sizes inside ctlkit (docs in README, "Quick mode").
# HOG=1 starts a process spinning on one core before the notebooks and kills it when the shell exits.
# JOBS=2 (the default): pytest-xdist runs two tests at a time, each worker in its own process; the
# notebooks go file by file (--dist loadfile), a notebook's cells in order in one kernel. So every
# notebook runs on a busy machine, beside another notebook: its claims must hold under load (README,
# "Any seed, full mode, a busy machine"). The controller runs no test; conftest.py gathers results.
QUICK_FLAG := $(if $(filter full,$(MODE)),0,1)
XDIST_UNIT := $(if $(filter-out 1,$(JOBS)),-n $(JOBS))
XDIST_NB := $(if $(filter-out 1,$(JOBS)),-n $(JOBS) --dist loadfile)
test-one: $(STAMP)
	@echo "== stack $(ONE): $(VENV)$(if $(CONSTRAINTS), pinned by $(CONSTRAINTS))$(if $(ENV_$(ONE)), with \
	$(ENV_$(ONE))) · $(MODE) mode · seed $(or $(SEED),0) · $(JOBS) at a time$(if $(HOG), · CPU hog on one core)$(if $(EMULATE_TF32), · TF32 emulated)$(if \
	$(filter notebooks,$(WHAT)), · notebooks only)"
	export CTLKIT_QUICK=$(QUICK_FLAG) MPLBACKEND=Agg TF_CPP_MIN_LOG_LEVEL=2 CTLKIT_STACK=$(ONE) $(ENV_$(ONE)) \
	       $(if $(SEED),CTLKIT_SEED=$(SEED)) $(if $(EMULATE_TF32),CTLKIT_EMULATE_TF32=$(EMULATE_TF32)) \
	       PATH="$(abspath $(VENV))/bin:$$PATH" && \
	$(VPY) tools/nbnorm.py --check notebooks && \
	$(VPY) -m ruff check . && \
	$(if $(filter all,$(WHAT)),$(VPY) -m pytest tests/ -q $(XDIST_UNIT) $(ONCE_$(ONE)) &&) \
	$(if $(HOG),{ $(VPY) -c 'while True: pass' & hog=$$!; trap 'kill $$hog 2>/dev/null' EXIT; } &&) \
	$(if $(filter full,$(MODE)),export CTLKIT_RECORD="$(abspath build/executed/$(ONE))" &&) \
	$(VPY) -m pytest --nbval-lax --nbval-current-env notebooks/ --ignore=notebooks/zh --ignore=notebooks/runs -q -p no:cacheprovider \
	    $(XDIST_NB)

# The book (tools/book.py): the notebooks as run in full mode on `current`, with their outputs, as a
# static site in build/book/ (English) and build/book/zh/ (Chinese), then checked in a browser
# (tests/book_check.py). A notebook whose executed copy in build/executed/current/ was made from its
# current content (make test MODE=full writes them) is not run again; NO_EXECUTE=1 fails instead of
# running any (CI: the book is made from the outputs its full-mode run proved).
BOOK_STAMP := $(VENV_current)/.book-installed
$(BOOK_STAMP): pyproject.toml | $(VENV_current)/.installed
	$(VENV_current)/bin/python -m pip install -e ".[dev,lab,book]"
	$(VENV_current)/bin/python -m pip check
	touch $(BOOK_STAMP)

book: $(BOOK_STAMP)
	@test "$(ONE)" = current || { echo "make book runs on STACK=current (its outputs are current's)"; exit 1; }
	$(VENV_current)/bin/python tools/book.py build $(if $(NO_EXECUTE),--no-execute)
	PATH="$(abspath $(VENV_current))/bin:$$PATH" $(VENV_current)/bin/python -m pytest tests/book_check.py -q -p no:cacheprovider

# The notebooks under each seed of SEEDS, in this stack's venv (STACK=all: current).
sweep: $(STAMP)
	$(if $(ENV_$(ONE)),export $(ENV_$(ONE)) &&) $(if $(EMULATE_TF32),CTLKIT_EMULATE_TF32=$(EMULATE_TF32)) $(VPY) tools/sweep.py --seeds "$(SEEDS)" --mode $(MODE) \
	    $(if $(HOG),--hog) $(if $(KEEP),--keep --jobs $(JOBS)) --out notebooks/runs/sweep-$(ONE)-$(MODE).json

# The benchmark is notebook 12: its loops are written there, so it runs as the notebook runs.
bench: $(STAMP)
	mkdir -p notebooks/runs
	$(if $(QUICK),CTLKIT_QUICK=1,CTLKIT_QUICK=0) MPLBACKEND=Agg TF_CPP_MIN_LOG_LEVEL=2 \
	    $(VENV)/bin/jupyter nbconvert --to notebook --execute --ExecutePreprocessor.timeout=3600 \
	    --output-dir notebooks/runs notebooks/12_performance_lab.ipynb
	$(VENV)/bin/jupyter nbconvert --to markdown notebooks/runs/12_performance_lab.ipynb
	@grep -A14 "^ *variant  *examples/s" notebooks/runs/12_performance_lab.md
	@echo "every number of the run: notebooks/runs/12_performance_lab.md (and .ipynb)"

# stdlib only: no venv needed
normalize:
	$(PYTHON) tools/nbnorm.py notebooks

clean:
	find . -path './.venv*' -prune -o -type d \( -name __pycache__ -o -name .pytest_cache -o -name .ipynb_checkpoints \) \
	    -prune -exec rm -rf {} +
	rm -rf build dist *.egg-info notebooks/runs notebooks/zh/runs

distclean: clean
	rm -rf $(foreach s,$(STACKS),$(VENV_$(s)))
