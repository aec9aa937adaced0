# `make demo` and `make test` work on a fresh clone: each creates .venv when it is missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test lint clean

$(BIN)/ladder: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev,ray]'
	touch $(BIN)/ladder

demo: $(BIN)/ladder
	$(BIN)/ladder demo

test: $(BIN)/ladder
	$(BIN)/python -m pytest -q

lint: $(BIN)/ladder
	$(BIN)/ruff check ladder fits trainer_jax tests benchmarks

clean:
	rm -rf $(VENV) .pytest_cache
