# `make demo` and `make test` each build .venv from nothing, then run.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast check lint typecheck schemas golden golden-reports bench report-check mutate clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/evalops demo

# Every test, in parallel: one worker per CPU (tests sharing a module fixture stay together).
test: $(STAMP)
	$(BIN)/python -m pytest -q -n auto --dist loadgroup

# The default run without the slow, load and PostgreSQL tests.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -n auto --dist loadgroup -m "not slow and not load and not postgres"

check: lint typecheck

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

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
	$(BIN)/python tools/mutation_report.py run $(MODULES)

# Render the demo's HTML report and suite card in headless Chromium (screenshots in build/).
report-check: $(STAMP)
	$(BIN)/python tools/report_check.py --self-test --out build/report-check-self-test
	$(BIN)/python tools/report_check.py --out build/report-check

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build dist *.egg-info
