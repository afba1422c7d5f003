# Copy That: two commands on a fresh machine.
#   make lab    set everything up on first use, then open the course in JupyterLab
#               (make lab EDITION=zh: the Chinese edition)
#   make test   set everything up, then run every test
# Later runs skip what is already done.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
PORT   ?= 8888
JOBS   ?= 3
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# The environment is installed by uv (pinned here), from requirements.txt: several times faster
# than pip on a fresh machine.  uv does not read pip's configuration, so a wheel folder pip is
# configured to look in (`find-links`) is handed to it.
UV_VERSION := 0.13.9
FIND_LINKS ?= $(shell $(PYTHON) -m pip config get global.find-links 2>/dev/null)
# PyPI's torch for Linux is the CUDA build, which needs gigabytes of nvidia packages; the course
# runs on the CPU build.  With no local wheel folder, torch comes from PyTorch's CPU index (the
# pin torch==2.13.0 takes 2.13.0+cpu there); everything else still from PyPI.
TORCH_INDEX ?= $(if $(FIND_LINKS),,https://download.pytorch.org/whl/cpu)

.PHONY: setup lab lab-instructor test conformance exercises lectures check-exercises doctor system-deps test-deps hub-test-deps bench bench-memory clean site handout

setup: $(STAMP) system-deps

$(STAMP): requirements.txt pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' || \
	  { echo "The course is pinned to Python 3.11; found $$($(PYTHON) --version). Set PYTHON=/path/to/python3.11."; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet uv==$(UV_VERSION)
	$(VENV)/bin/uv pip install --quiet --python $(PY) --no-deps --compile-bytecode \
	  $(foreach d,$(FIND_LINKS),--find-links $(d)) \
	  $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX) --index-strategy unsafe-best-match) -r requirements.txt
	$(VENV)/bin/uv pip install --quiet --python $(PY) --no-deps --no-build-isolation -e .
	@touch $@

# Graphviz's `dot` draws the diagrams.  Installed with apt-get when we are root and it is
# missing; otherwise we say how and carry on (diagrams then fall back to text).
system-deps:
	@if command -v dot >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "Installing Graphviz (dot) with apt-get ..."; \
	  apt-get install -y -qq graphviz >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq graphviz; }; \
	else \
	  case "$$(uname -s)" in \
	    Darwin) hint="brew install graphviz" ;; \
	    *) hint="sudo apt-get install graphviz   (Fedora: sudo dnf install graphviz)" ;; \
	  esac; \
	  echo "Graphviz's dot is missing: diagrams will be shown as text. To get pictures: $$hint"; \
	fi

# What the test suite needs beyond the course itself: bubblewrap for the grading sandbox,
# Chromium (and a Chinese font) for the browser tests, a JupyterHub for the hub guide's test.
test-deps: setup hub-test-deps
	@if ! command -v bwrap >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "Installing bubblewrap with apt-get ..."; \
	    apt-get install -y -qq bubblewrap >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq bubblewrap; }; \
	  else echo "bubblewrap is missing: $(SUDO) apt-get install bubblewrap"; fi; \
	fi
	@if ! command -v chromium >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "Installing Chromium with apt-get (for the browser test) ..."; \
	    apt-get install -y -qq chromium >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq chromium; }; \
	  else echo "Chromium is missing, the browser test will be skipped: $(SUDO) apt-get install chromium"; fi; \
	fi
	@if command -v fc-list >/dev/null 2>&1 && [ -z "$$(fc-list :lang=zh 2>/dev/null)" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "Installing a Chinese font with apt-get (the Chinese edition's browser screenshots) ..."; \
	    apt-get install -y -qq fonts-noto-cjk >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq fonts-noto-cjk; }; \
	  else echo "No Chinese font: the Chinese edition's screenshots show boxes: $(SUDO) apt-get install fonts-noto-cjk"; fi; \
	fi

# The hub guide's end-to-end test (tests/test_hub_live.py) runs a real JupyterHub with the
# guide's files: JupyterHub from PyPI in an environment of its own that also sees the course's
# packages (the grader's server runs from it too; the course's lock leaves JupyterHub out), and its
# proxy from npm.  Without npm the test is skipped, saying why (outside CI).
HUB_DIR     := .cache/hub
HUB_VERSION := 6.1.1
CHP_VERSION := 5.3.0

hub-test-deps: $(HUB_DIR)/.installed

$(HUB_DIR)/.installed: $(STAMP)
	$(PYTHON) -m venv $(HUB_DIR)/venv
	$(HUB_DIR)/venv/bin/pip install --quiet jupyterhub==$(HUB_VERSION)
	$(PY) -c 'import sysconfig; open("$(HUB_DIR)/venv/lib/python3.11/site-packages/zz_course.pth", "w").write("import site; site.addsitedir(%r)\n" % sysconfig.get_paths()["purelib"])'
	@if command -v npm >/dev/null 2>&1; then \
	  npm install --silent --no-audit --no-fund --prefix $(HUB_DIR)/chp configurable-http-proxy@$(CHP_VERSION); \
	else echo "npm is missing: the hub guide's end-to-end test will be skipped ($(SUDO) apt-get install npm)"; fi
	@touch $@

# JupyterLab whose terminals run the course's commands (`copy-that check ...`); the learner's
# lab hides nbgrader's instructor tools, the instructor's shows them (autograder/learner/lab.py).
# It ends with one line holding the lab's address, and opens a browser where there is one.
# `make lab EDITION=zh` opens the Chinese edition (zh/, at zh/course/00_start_here.ipynb), speaking
# Chinese (not LANG=zh: LANG is the system's locale variable).
EDITION ?= en
lab: setup
	@$(PY) -m autograder lab --root "$(CURDIR)" --port $(PORT) --lang $(EDITION)

lab-instructor: setup
	@$(PY) -m autograder lab --root "$(CURDIR)" --port $(PORT) --instructor

# The whole suite in one run on $(JOBS) workers, each test file on one worker, in the order
# tests/conftest.py gives (xdist's own reordering off): much of it waits on kernels and servers,
# so three workers keep two cores busy; the browser tests start first, beside the rest.
test: test-deps
	$(PY) -m pytest -n $(JOBS) --dist loadfile --no-loadscope-reorder

# nbgrader's own test suite (autograde, generate_feedback, validate), plain and with the course's
# grading settings in a user-level configuration: fails if the second passes fewer tests.
conformance: test-deps
	$(PY) tests/conformance.py

exercises: setup
	$(PY) -m autograder build

check-exercises: setup
	$(PY) -m autograder build --check

# Re-run the lectures and store their outputs (what readers see on GitHub and what the tests compare);
# the Chinese edition's lectures then get the same outputs (zh sync: code and outputs come from English).
lectures: setup
	$(VENV)/bin/jupyter nbconvert --to notebook --execute --inplace --ExecutePreprocessor.timeout=600 course/*.ipynb
	$(PY) -m autograder zh sync

# The lectures as static HTML with their outputs, for reading without installing anything.
site: setup
	$(PY) -m autograder site

# What students get: build/handout/copy-that/ and .zip (course/, exercises/, README; no solutions).
handout: setup
	$(PY) -m autograder handout

# Plain `nbgrader autograde` against `copy-that grade --all` on PER correct submissions of every
# assignment (4 and 16 by default), with the cells alone as a floor: ratios, identical scores.
bench: test-deps
	PYTHONPATH=tests $(PY) bench/grade_bench.py --per $(or $(PER),4 16) --formgrader

# The grader's memory over a class of N submissions (1,000 by default): its peak RSS and growth.
bench-memory: test-deps
	PYTHONPATH=tests $(PY) bench/memory_bench.py --n $(or $(N),1000)

doctor: setup
	$(PY) -m autograder doctor

clean:
	rm -rf $(VENV) .pytest_cache
