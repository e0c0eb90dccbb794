# Everything runs from the project's own virtual environment in .venv; nothing is installed
# or registered outside it. `make lab` installs what the lessons need; `make test` adds the
# test, lint, website and browser tools.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev
LEARNER_EXTRAS := frameworks,agentdojo
INSTALLER ?= auto
N      ?=
LAB_ARGS ?=

# Recipes see the venv's bin first on PATH, so `python`, `jupyter` and the kernel named
# `python3` all resolve to the venv's interpreter. JUPYTER_PREFER_ENV_PATH makes the venv's
# kernelspecs win over any in the user's ~/.local/share/jupyter.
export PATH := $(abspath $(BIN)):$(PATH)
export VIRTUAL_ENV := $(abspath $(VENV))
export JUPYTER_PREFER_ENV_PATH := 1
# The course's Jupyter settings (jupyter_config/: no news prompt, no unencrypted-TCP warning
# from kernels), searched before the user's own JUPYTER_CONFIG_PATH entries, never instead.
COURSE_JUPYTER := $(abspath jupyter_config)
space := $(subst ,, )
export JUPYTER_CONFIG_PATH := $(subst $(space),:,$(strip $(COURSE_JUPYTER) \
  $(filter-out $(COURSE_JUPYTER),$(subst :, ,$(JUPYTER_CONFIG_PATH)))))
export PYTHONHASHSEED := 0
unexport PYTHONHOME
# Byte-code caches (in __pycache__/, ignored by git, removed by make clean): without them every
# test process, kernel and subprocess compiles the course and re-rewrites the tests' asserts.
unexport PYTHONDONTWRITEBYTECODE

NBVAL_ARGS := --nbval --nbval-current-env --nbval-sanitize-with nbval_sanitize.cfg \
              --nbval-cell-timeout=60 -p no:cacheprovider

.PHONY: venv dev lab lesson test lint typecheck unit nbval notebooks figures bench clean distclean \
        test-browser site site-pictures

venv: $(STAMP)
dev: $(DEV_STAMP)

# The learner's environment: the course and what the lessons import (LEARNER_EXTRAS).
# Created if missing; re-installed only when pyproject.toml is newer than the stamp. uv
# installs it (bootstrapped with pip when it is not on PATH); INSTALLER=pip uses plain pip.
$(STAMP): pyproject.toml
	@$(PYTHON) scripts/setup_env.py --venv $(VENV) --extras $(LEARNER_EXTRAS) --installer $(INSTALLER)
	@touch $@

# The tools `make test` needs on top: pytest, nbval, ruff, mypy, the website's Sphinx,
# Playwright for the browser check.
$(DEV_STAMP): $(STAMP)
	@$(PYTHON) scripts/setup_env.py --venv $(VENV) --extras $(LEARNER_EXTRAS),dev --installer $(INSTALLER)
	@touch $@

# JupyterLab on notebooks/, opening lesson 01 (`make lesson N=05` opens lesson 05); prints
# the address to open once the server is up. LAB_ARGS go to jupyter lab, e.g. --port=8899.
lab: venv
	@$(BIN)/python scripts/lab.py --lesson $(or $(N),01) $(LAB_ARGS)

lesson: venv
	@if [ -z "$(N)" ]; then echo "make lesson: say which, e.g. make lesson N=05"; exit 2; fi
	@$(BIN)/python scripts/lab.py --lesson $(N) $(LAB_ARGS)

lint: dev
	$(BIN)/ruff check primer tests scripts conftest.py

# One run: the core (primer/loop) with every --strict flag, the rest of primer with mypy's
# defaults (pyproject.toml's [tool.mypy] overrides).
typecheck: dev
	$(BIN)/mypy primer

# The unit tests, spread over the machine's cores (pytest-xdist); an idle worker takes
# queued tests from a busy one (worksteal), so a long test does not hold back the end.
unit: dev
	@echo "unit tests: a worker per core; before its first dot each worker collects every" \
	  "test (about half a minute; more on a first run, which also writes the byte-code caches)"
	$(BIN)/pytest -q -n auto --dist worksteal tests

# Every notebook re-executed and compared, a notebook per worker (--dist loadfile keeps a
# notebook's cells, which share one kernel, on one worker), with HOME, XDG_CONFIG_HOME, the
# time zone and the locale moved (scripts/run_nbval.py): no committed output may depend on them.
nbval: dev
	@if ls notebooks/*.ipynb >/dev/null 2>&1; then \
	  $(BIN)/python scripts/run_nbval.py -q -n auto --dist loadfile $(NBVAL_ARGS) notebooks; \
	else \
	  echo "nbval: no notebooks/*.ipynb yet, nothing to validate"; \
	fi

# The unit tests run in the foreground; nbval, mypy and the website's build run one after
# another in the background beside them (scripts/beside.py): each of these leaves part of a
# core idle while its tests wait on processes and kernels, and the two together keep both
# cores busy. The background's output is shown when the unit tests end, then a line for each
# part that failed. Ctrl-C stops both.
BESIDE = $(BIN)/python scripts/beside.py
test: dev
	$(MAKE) --no-print-directory lint
	@+$(BESIDE) --log build/beside.log --background "$(MAKE) --no-print-directory nbval" \
	  --background "$(MAKE) --no-print-directory typecheck" \
	  --background "$(MAKE) --no-print-directory site" -- $(MAKE) --no-print-directory unit
	@echo "make test: all passed (ruff, the unit tests, nbval, mypy, the website's checks)"

# Every notebook, or one: make notebooks N=05
notebooks: dev
	$(BIN)/python scripts/run_notebooks.py $(N)

figures: venv
	$(BIN)/python -m primer figures

# The course as a website in build/site/: Sphinx + myst-nb render the committed, executed
# notebooks (nothing is re-executed), offline; then links, pages, pictures and figures are
# checked. Open build/site/index.html.
site: dev
	$(BIN)/python scripts/build_site.py

# The built site, rebuilt only when what it is made from changed (make site always rebuilds;
# a build that fails its checks is deleted, .DELETE_ON_ERROR). The folder notebooks/. is
# there for a lesson removed (spelled so, not as the target `notebooks`, which runs them all),
# primer/views/figures.py for the figures' captions.
SITE_INPUTS := README.md scripts/build_site.py primer/views/figures.py notebooks/. \
               $(wildcard notebooks/*.ipynb site/* site/*/* figures/*)
.DELETE_ON_ERROR:
build/site/index.html: $(SITE_INPUTS) | dev
	$(BIN)/python scripts/build_site.py

# JupyterLab + headless Chromium (Debian's /usr/bin/chromium, driven by Playwright): every
# lesson with a panel, run cell by cell, each kind of control moved and read from the page;
# then the built website (a lesson page shows its table and a figure). Screenshots in
# browser-artifacts/. Stops the servers it starts.
test-browser: build/site/index.html
	$(BIN)/python scripts/browser_check.py --site build/site

# The pictures of the panels the website shows (site/panels/), taken by the browser check.
site-pictures: dev
	$(BIN)/python scripts/browser_check.py --update-site-pictures

bench: venv
	$(BIN)/python -m primer bench

clean:
	rm -rf build dist *.egg-info .pytest_cache .ruff_cache browser-artifacts
	find . -path ./$(VENV) -prune -o \
	  \( -name __pycache__ -o -name .ipynb_checkpoints \) -type d -print0 | xargs -0 rm -rf

distclean: clean
	rm -rf $(VENV)
