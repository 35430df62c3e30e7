import pytest

from kchaos.clusters import ClusterSpec
from kchaos.clusters.local import LocalJvmCluster
from kchaos.clusters.processes import processes_with_marker
from kchaos.clusters.reaper import start_reaper

# Faster failure detection than the slow-machine defaults, so ISR changes show within seconds.
FAST_ISR = {"replica.lag.time.max.ms": "8000"}


def start_local(tmp_path, **spec) -> LocalJvmCluster:
    start_reaper(tmp_path)  # if the test process dies, its cluster dies with it
    cluster = LocalJvmCluster(ClusterSpec.load(spec), tmp_path)
    cluster.start()
    return cluster


def restore(cluster: LocalJvmCluster) -> None:
    """Put a shared cluster back as a test may have left it: links up, every node running."""
    if cluster.toxiproxy is not None:
        cluster.network.heal()
    if cluster.messages is not None:
        cluster.messages.reset()
    for node in cluster.nodes:
        if node.is_paused:
            node.resume()
        if not node.is_running:
            node.start()
    cluster._close_admin()
    cluster.wait_healthy(180)


@pytest.fixture(scope="session")
def _cluster3_session(tmp_path_factory):
    work = tmp_path_factory.mktemp("cluster3")
    # the message proxy sits on every client link of the shared cluster, so the tests that use
    # it for message faults cost no cluster of their own and every other test runs through it
    cluster = start_local(work, nodes=3, broker=FAST_ISR, proxy_messages=True)
    yield cluster
    cluster.stop()
    assert processes_with_marker(str(cluster.work_dir)) == [], "cluster3 leaked processes"


@pytest.fixture
def cluster3(_cluster3_session):
    """One 3-node combined-mode cluster shared by many tests; healthy at the start of each."""
    restore(_cluster3_session)
    return _cluster3_session
