# `make demo` builds .venv with the runtime dependencies only, then runs the demo;
# `make test` and the other targets add the development tools (tests, linters, Inspect AI).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUNTIME := $(VENV)/.installed-runtime
STAMP := $(VENV)/.installed
# Where `make demo` writes (the README's tour works in this directory).
DEMO_DIR ?= /tmp/evalops-demo
# --no-compile: byte-compiling every installed module (scipy alone has thousands) took half
# of the install's CPU time; Python compiles the modules a run imports, once, on first use.
PIP_FLAGS := --quiet --disable-pip-version-check --no-compile
# ... which relies on Python writing those .pyc files: container images often set
# PYTHONDONTWRITEBYTECODE=1, and then every evalops process would compile SQLAlchemy,
# pydantic and the rest from source again (2.5 s of CPU for a command instead of 1 s).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: demo test test-fast check lint typecheck layers schemas golden golden-reports bench report-check mutate clean

$(RUNTIME): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install $(PIP_FLAGS) -e .
	touch $@

$(STAMP): $(RUNTIME)
	$(BIN)/python -m pip install $(PIP_FLAGS) -e '.[dev]'
	touch $@

# A directory an earlier `make demo` wrote is replaced; any other non-empty one is refused.
demo: $(RUNTIME)
	@if [ -f "$(DEMO_DIR)/demo-summary.md" ]; then rm -rf "$(DEMO_DIR)"; fi
	$(BIN)/evalops demo --dir "$(DEMO_DIR)"
	@echo
	@echo "next: put evalops on your PATH and work in the demo's registry:"
	@echo "  . $(CURDIR)/$(BIN)/activate"
	@echo "  cd $(DEMO_DIR)"
	@echo "  evalops gate list"

# Every test, in parallel: one worker per CPU (tests sharing a module fixture stay together).
test: $(STAMP)
	$(BIN)/python -m pytest -q -n auto --dist loadgroup

# The quick loop (about 2 minutes on 2 idle CPUs): the tests that build no registry workspace
# and run no CLI (tests/mutation_fast.py, the selection mutation testing uses), without the
# slow, load and PostgreSQL ones. `make test` runs everything.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -n auto --dist loadgroup -p tests.mutation_fast -m "not slow and not load and not postgres"

check: lint typecheck layers

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

# The import layers of ARCHITECTURE.md (contracts in pyproject.toml, [tool.importlinter]).
layers: $(STAMP)
	$(BIN)/lint-imports

# Regenerate registry/schemas from the pydantic models.
schemas: $(STAMP)
	$(BIN)/evalops schema export registry/schemas

# Regenerate the pinned golden digests (only with a spec_schema_version bump).
golden: $(STAMP)
	$(BIN)/python -m tests.golden_digests

# Regenerate tests/golden/reports/* (only when a report change is intended; review the diff).
golden-reports: $(STAMP)
	$(BIN)/python -m tests.golden_reports

bench: $(STAMP)
	$(BIN)/python -m benchmarks.run

# Mutation testing of the domain rules (mutmut; slow, never part of `make test`). Report in
# tests/MUTATION.md. MODULES="reruns waivers" runs only those modules of evalops/domain/.
mutate: $(STAMP)
	$(BIN)/python tools/mutation_report.py run $(if $(JOBS),--max-children $(JOBS)) $(MODULES)

# Render the demo's HTML report, suite card and every page of its registry site in headless
# Chromium at 1,400 and 390 px (screenshots in build/).
report-check: $(STAMP)
	$(BIN)/python tools/report_check.py --self-test --out build/report-check-self-test
	$(BIN)/python tools/report_check.py --out build/report-check

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build dist *.egg-info
