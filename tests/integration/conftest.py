import pytest

from clusters import ClusterSpec
from clusters.local import LocalJvmCluster
from clusters.processes import processes_with_marker

# Faster failure detection than the slow-machine defaults, so ISR changes show within seconds.
FAST_ISR = {"replica.lag.time.max.ms": "8000"}


def start_local(tmp_path, **spec) -> LocalJvmCluster:
    cluster = LocalJvmCluster(ClusterSpec.load(spec), tmp_path)
    cluster.start()
    return cluster


@pytest.fixture(scope="session")
def cluster3(tmp_path_factory):
    """One 3-node combined-mode cluster shared by the tests that put it back as they found it."""
    work = tmp_path_factory.mktemp("cluster3")
    cluster = start_local(work, nodes=3, broker=FAST_ISR)
    yield cluster
    cluster.stop()
    assert processes_with_marker(str(cluster.work_dir)) == [], "cluster3 leaked processes"
