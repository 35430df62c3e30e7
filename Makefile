# The two commands the README promises: `make run` and `make test`.
# Both create .venv on first use and install the project into it; Kafka jars
# (Maven) and Toxiproxy (go install) are fetched into ~/.cache/kchaos on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
ARGS ?=

.PHONY: run test test-long test-external setup clean-venv

$(BIN)/.kchaos-installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test,docker]'
	touch $@

setup: $(BIN)/.kchaos-installed
	$(BIN)/kchaos setup

run: setup
	$(BIN)/kchaos run $(ARGS)

# The CI tier: unit tests (hand-made data, no JVM, proxy or browser) and the real-broker tests
# that every check and fault kind needs; the 15 slowest are printed. Multi-minute scenarios are
# marked `long` and run by `make test-long` (and, as campaigns, by `kchaos ci nightly`). Two
# pytest workers: the tests on the shared 3-node cluster and the unit tests in one; in the other
# the Spark-only tests and the tests that start their own clusters (tests/conftest.py).
# actionlint (go install, into the cache) lints ci/examples/*.yml (tests/unit/test_ci_workflow.py).
test: setup
	$(BIN)/kchaos setup --browser --clock --actionlint
	$(BIN)/python -m pytest -m "not long" -n 2 --dist loadgroup --durations=15 $(ARGS)

test-long: setup
	$(BIN)/python -m pytest -m long --durations=15 $(ARGS)

# Faults on clusters kchaos did not start: brokers in network namespaces with their own sshd
# (tests/external_lab.py; root, and Debian's iptables and openssh-server, installed if missing).
# The quick ones run in `make test` too; the campaign runs are `long`.
test-external: setup
	$(BIN)/python -m pytest -m external --durations=15 $(ARGS)

clean-venv:
	rm -rf $(VENV)
