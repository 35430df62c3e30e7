# The two commands the README promises: `make run` and `make test`.
# Both create .venv on first use and install the project into it; Kafka jars
# (Maven) and Toxiproxy (go install) are fetched into ~/.cache/kchaos on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
ARGS ?=

.PHONY: run test setup clean-venv

$(BIN)/.kchaos-installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test,docker]'
	touch $@

setup: $(BIN)/.kchaos-installed
	$(BIN)/kchaos setup

run: setup
	$(BIN)/kchaos run $(ARGS)

test: setup
	$(BIN)/kchaos setup --browser
	$(BIN)/python -m pytest $(ARGS)

clean-venv:
	rm -rf $(VENV)
