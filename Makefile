# Every target works on a fresh clone: `install` makes .venv and installs everything into it.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# Warp's kernel cache lives outside the repo and survives between runs (compiling is ~26 s per model).
export WARP_CACHE_PATH ?= $(HOME)/.cache/warp

.PHONY: install test test-fast check demo bench docs figures screenshots lint clean

install: $(STAMP)

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# torch==2.13.0 is the CPU build on disk; a bare `torch` would pull a ~5 GB CUDA build.
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q torch==2.13.0
	# editable_mode=compat: the clone goes on sys.path as a plain path entry, which mypy and other static tools
	# read (the default import hook is invisible to them, so `py.typed` would go unseen).
	$(PY) -m pip install -q -e ".[mjwarp,plot,sb3,torchrl,rsl_rl,skrl,dev,docs,envpool,export]" \
		--config-settings editable_mode=compat
	touch $(STAMP)

# Tests run in two processes (pytest-xdist: the suite is CPU-bound); `make test PYTEST_WORKERS=0` runs one.
PYTEST_WORKERS ?= 2

test: install
	$(PY) -m pytest -n $(PYTEST_WORKERS)

# A quick subset for the edit-test loop: no test marked slow and no full site build (`make test` runs them all).
test-fast: install
	$(PY) -m pytest -n $(PYTEST_WORKERS) -m "not slow" -k "not site_builds and not api_reference"

# Style and types: ruff's lint rules, ruff's formatting (checked, not applied) and mypy (pyproject.toml's settings).
# .ci/run runs it before the tests.
LINTED := gym_graphreset tests benchmarks examples docs/conf.py docs/tools
check: install
	$(VENV)/bin/ruff check $(LINTED)
	$(VENV)/bin/ruff format --check $(LINTED)
	$(VENV)/bin/mypy

# The documentation site (Sphinx + MyST + furo): warnings are errors (-W) and every cross-reference must
# resolve (-n), so a broken link fails. `make test` builds it the same way (tests/test_docs.py) and runs every
# page's code. Only the `docs` extra is needed: conf.py mocks the optional engines and trainers.
docs: install
	$(VENV)/bin/sphinx-build -n -W --keep-going -b html docs docs/_build/html
	@echo "open docs/_build/html/index.html"

# The figures in docs/img, redrawn from the measurements in benchmarks/results/, and the picture of the
# package's layers (docs/img/layers.png) from its imports (no GPU needed).
figures: install
	$(PY) docs/tools/figures.py
	$(PY) docs/tools/draw_layers.py

# Full-page screenshots of the built site in a 1,400-px window, to check it as a visitor sees it (needs
# Chromium: apt-get install chromium; not part of `make test`). PNGs in docs/_build/shots.
screenshots: docs
	$(PY) docs/tools/screenshots.py

DEMO_ENV ?= gym_graphreset/CartPole-v1

demo: install
	$(PY) -m gym_graphreset demo --env-id $(DEMO_ENV) --out benchmarks/results

bench: install
	$(PY) -m pytest benchmarks --benchmark-enable --benchmark-json=benchmarks/results/pytest-benchmark.json
	$(PY) -m gym_graphreset bench --env-id $(DEMO_ENV) --out benchmarks/results

lint: check

clean:
	rm -rf $(VENV) docs/_build .pytest_cache .ruff_cache .mypy_cache .hypothesis *.egg-info
