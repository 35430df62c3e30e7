import os
import tempfile


# Tests never touch the user's own clusters: state goes to a temporary directory.
os.environ.setdefault("KCHAOS_STATE", tempfile.mkdtemp(prefix="kchaos-test-state-"))

import pytest


@pytest.fixture(scope="session")
def spark():
    """One local Spark session for the whole test session (the verifier's engine)."""
    from kchaos.verifier.spark_env import spark_session

    session = spark_session("local[2]", app="kchaos-tests", driver_memory="1g",
                            extra_conf={"spark.sql.shuffle.partitions": "1", "spark.sql.adaptive.enabled": "false"})
    yield session
    session.stop()
