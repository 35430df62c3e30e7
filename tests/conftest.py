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

    LAYERS = frozenset({"harness", "clusters", "workloads", "faults", "verifier", "reports", "ci", "campaigns"})

    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".")[0] in self.LAYERS:
            raise ModuleNotFoundError(f"No module named {fullname!r} (use kchaos.{fullname})", name=fullname)
        return None


sys.meta_path.insert(0, _OnlyTheKchaosNamespace())

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def spark():
    """One local Spark session for the whole test session (the verifier's engine)."""
    from kchaos.verifier.spark_env import spark_session

    session = spark_session("local[2]", app="kchaos-tests", driver_memory="1g",
                            extra_conf={"spark.sql.shuffle.partitions": "1", "spark.sql.adaptive.enabled": "false"})
    yield session
    session.stop()
