# The pip route. Everything runs from the project's own virtual environment in .venv;
# nothing is installed or registered outside it.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
LESSON := 01_the_model_is_stateless.ipynb
LAB_ARGS ?=

# Recipes see the venv's bin first on PATH, so `python`, `jupyter` and the kernel named
# `python3` all resolve to the venv's interpreter. JUPYTER_PREFER_ENV_PATH makes the venv's
# kernelspecs win over any in the user's ~/.local/share/jupyter.
export PATH := $(abspath $(BIN)):$(PATH)
export VIRTUAL_ENV := $(abspath $(VENV))
export JUPYTER_PREFER_ENV_PATH := 1
export PYTHONHASHSEED := 0
unexport PYTHONHOME

NBVAL_ARGS := --nbval --nbval-current-env --nbval-sanitize-with nbval_sanitize.cfg \
              --nbval-cell-timeout=60 -p no:cacheprovider

.PHONY: venv lab test lint unit nbval notebooks figures bench clean distclean test-browser

venv: $(STAMP)

# Create .venv if it is missing; (re)install only when pyproject.toml is newer than the stamp.
$(STAMP): pyproject.toml
	@if [ ! -x $(BIN)/python ]; then \
	  $(PYTHON) -c 'import sys; assert sys.version_info >= (3, 10), "Python >= 3.10 needed"' || exit 1; \
	  if $(PYTHON) -c 'import ensurepip' 2>/dev/null; then \
	    $(PYTHON) -m venv $(VENV); \
	  else \
	    echo "ensurepip is missing (on Debian/Ubuntu: apt-get install python3-venv);"; \
	    echo "creating the venv without pip and installing pip into it from PyPI"; \
	    $(PYTHON) -m venv --without-pip $(VENV) && \
	    $(PYTHON) -m pip --python $(BIN)/python install --quiet pip; \
	  fi; \
	fi
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev,frameworks]'
	@cd / && $(abspath $(BIN))/python -c 'import primer' || \
	  { echo "the editable install cannot import primer: is primer/__init__.py there?"; exit 1; }
	@touch $@

lab: venv
	$(BIN)/jupyter lab --ServerApp.root_dir=notebooks $(LAB_ARGS) \
	  $(if $(filter 0,$(shell id -u)),--allow-root) \
	  $(if $(wildcard notebooks/$(LESSON)),--LabApp.default_url=/lab/tree/$(LESSON))

lint: venv
	$(BIN)/ruff check primer tests scripts

unit: venv
	$(BIN)/pytest -q tests

nbval: venv
	@if ls notebooks/*.ipynb >/dev/null 2>&1; then \
	  $(BIN)/pytest -q $(NBVAL_ARGS) notebooks; \
	else \
	  echo "nbval: no notebooks/*.ipynb yet, nothing to validate"; \
	fi

test: venv
	$(MAKE) --no-print-directory lint
	$(MAKE) --no-print-directory unit
	$(MAKE) --no-print-directory nbval

notebooks: venv
	$(BIN)/python scripts/run_notebooks.py

figures: venv
	$(BIN)/python -m primer figures

# JupyterLab + headless Chromium (Debian's /usr/bin/chromium, driven by Playwright): run
# lesson 05, move the exit explorer's controls, read the stop cause; screenshots in
# browser-artifacts/. Stops the server it starts.
test-browser: venv
	$(BIN)/python scripts/browser_check.py

bench: venv
	$(BIN)/python -m primer bench

clean:
	rm -rf build dist *.egg-info .pytest_cache .ruff_cache browser-artifacts
	find . -path ./$(VENV) -prune -o \
	  \( -name __pycache__ -o -name .ipynb_checkpoints \) -type d -print0 | xargs -0 rm -rf

distclean: clean
	rm -rf $(VENV)
