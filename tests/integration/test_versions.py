"""Other Kafka releases: resolved from Maven Central, formatted, started and used transactionally."""

import pytest

from kchaos.harness.smoke import run_smoke
from kchaos.runtime.artifacts import has_own_tools, resolve_kafka, version_key
from kchaos.runtime.kafka_tools import describe_features
from kchaos.runtime.processes import processes_with_marker

from .conftest import start_local


@pytest.mark.parametrize("version, tv", [
    ("4.4.0", 2),
    ("4.3.1", 2),
    pytest.param("4.1.2", 2, marks=pytest.mark.long),
    pytest.param("3.9.1", None, marks=pytest.mark.long),
])
def test_release_starts_and_runs_transactions(tmp_path, version, tv):
    cluster = start_local(tmp_path, nodes=1, kafka_version=version)
    try:
        assert run_smoke(cluster, records=100, batch=20).ok
        info = cluster.info()
        assert info["kafka_version"] == version
        # the release's own admin tools when the registry has them; kafka-tools 4.4.0 was missing
        # from it until late 2026, and then the newest older tools are used and recorded
        # (tests/unit/test_local_plan.py covers that choice)
        if has_own_tools(resolve_kafka(version)):
            assert info["admin_tools_version"] == version
        else:
            assert version_key(info["admin_tools_version"]) < version_key(version)
        if tv is not None:
            assert describe_features(cluster).get("transaction.version") == tv
        assert list(cluster.node(1).logs_dir.glob("server.log")), "the broker must log (log4j wiring)"
        assert cluster.node(1).logs_dir.joinpath("server.log").stat().st_size > 0
    finally:
        cluster.stop()
    assert processes_with_marker(str(cluster.work_dir)) == []
