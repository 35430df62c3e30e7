import importlib.abc
import os
import sys
import tempfile


# Tests never touch the user's own clusters: state goes to a temporary directory.
os.environ.setdefault("KCHAOS_STATE", tempfile.mkdtemp(prefix="kchaos-test-state-"))


class _OnlyTheKchaosNamespace(importlib.abc.MetaPathFinder):
    """The checkout's folders (harness/, reports/, ...) are on sys.path while tests run, which a
    wheel install does not have: refuse their bare names, so that code which imports or loads
    ``reports`` instead of ``kchaos.reports`` fails here rather than for a user."""

    LAYERS = frozenset({"harness", "clusters", "workloads", "faults", "verifier", "reports", "ci", "cli", "campaigns"})

    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".")[0] in self.LAYERS:
            raise ModuleNotFoundError(f"No module named {fullname!r} (use kchaos.{fullname})", name=fullname)
        return None


sys.meta_path.insert(0, _OnlyTheKchaosNamespace())

import pytest  # noqa: E402
from hypothesis import settings  # noqa: E402

# No per-example deadline: the unit tests run beside brokers and Spark on two cores (make test's
# second worker), where a scheduling pause would fail a pure function's example by the clock
settings.register_profile("kchaos", deadline=None)
settings.load_profile("kchaos")

#: make test's two workers (``-n 2 --dist loadgroup``): the tests on the shared 3-node cluster
#: (tests/integration/conftest.py's ``_cluster3_session``) in one, everything else in the other:
#: the unit tests, the Spark-only checks and the tests that start their own clusters or labs (the
#: CLI's runs, clock and disk faults, external clusters, releases, the mutations). Each worker
#: keeps one shared cluster or none. The unit tests (about 130 s) went to the shared cluster's
#: worker on 2026-11-28, when it was the shorter half, and back on 2026-12-02 with the mutations
#: on a cluster of their own, when it was the longer (2106 s against 1996 s) and most Spark
#: checker copies had gone to the long tier
SHARED_CLUSTER = "_cluster3_session"


def pytest_itemcollected(item):
    # marked as each test is collected, before any pytest_collection_modifyitems hook: pytest-xdist's
    # own turns the marks into groups, and may run before this project's
    shared = SHARED_CLUSTER in getattr(item, "fixturenames", ())
    item.add_marker(pytest.mark.xdist_group("cluster3" if shared else "standalone"))


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session):
    # an xdist worker of --dist loadgroup names each test by its group ("...@cluster3"). If the
    # groups did not take (a pytest whose node ids xdist cannot rename), both workers would start
    # clusters at once and `make test` would run for well over an hour: stop here instead
    if getattr(session.config.option, "loadgroup", False) and session.items and "@" not in session.items[0].nodeid:
        raise pytest.UsageError("pytest-xdist's --dist loadgroup did not group the tests (node ids without "
                                f"'@group'; pytest {pytest.__version__}): see the pin in pyproject.toml")


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    """One local Spark session for the whole test session (the verifier's engine). Its JVM
    starts in a temporary directory: Spark 4.0 leaves "artifacts/" in the driver's working
    directory, which would otherwise be the checkout (the job itself runs in the run's verifier/)."""
    from kchaos.verifier.spark.env import spark_session

    here = os.getcwd()
    os.chdir(tmp_path_factory.mktemp("spark-driver"))
    try:
        # Hand-made runs of a few records: the job's own choice for small runs (C1 only, see
        # QUICK_JIT_BELOW), and expressions interpreted, not compiled. Each check generates
        # classes that C1 and C2 then compile, for a few rows: 8.5-9 JVM CPU seconds a check
        # instead of 20-21 (bench/spark_small_checks.py, docs/benchmarks.md). Not the job's
        # setting: at a default run's size, interpreting made its checks slower (55-66 s against
        # 34-44 s). The tests that run the job itself (the default campaign, test_spark_driver_jvm,
        # the workload tests that verify with Spark) keep its settings: generated code is tested.
        session = spark_session("local[2]", app="kchaos-tests", driver_memory="1g", jit="quick",
                                extra_conf={"spark.sql.shuffle.partitions": "1", "spark.sql.adaptive.enabled": "false",
                                            "spark.sql.codegen.wholeStage": "false",
                                            "spark.sql.codegen.factoryMode": "NO_CODEGEN"})
    finally:
        os.chdir(here)
    yield session
    session.stop()
