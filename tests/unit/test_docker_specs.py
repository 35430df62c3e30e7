"""Docker backend: the generated container specs (no engine needed) and a clean skip/error without one."""

import pytest

from kchaos.clusters import ClusterSpec, create_cluster
from kchaos.clusters.docker import DockerCluster, container_specs
from kchaos.errors import ClusterError


def test_combined_mode_specs():
    spec = ClusterSpec.load({"backend": "docker", "nodes": 3, "broker": {"replica.lag.time.max.ms": "9000"}})
    specs = container_specs(spec, "kc", {1: 30001, 2: 30002, 3: 30003}, "AAAAAAAAAAAAAAAAAAAAAA")
    assert [s.name for s in specs] == ["kc-n1", "kc-n2", "kc-n3"]
    env = specs[1].environment
    assert env["KAFKA_NODE_ID"] == "2"
    assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"
    assert env["KAFKA_CONTROLLER_QUORUM_VOTERS"] == "1@kc-n1:19093,2@kc-n2:19093,3@kc-n3:19093"
    assert env["KAFKA_ADVERTISED_LISTENERS"] == "INTERNAL://kc-n2:19092,CLIENT://127.0.0.1:30002"
    assert env["KAFKA_TRANSACTION_STATE_LOG_NUM_PARTITIONS"] == "3"
    assert env["KAFKA_REPLICA_LAG_TIME_MAX_MS"] == "9000"  # user override wins
    assert env["CLUSTER_ID"] == "AAAAAAAAAAAAAAAAAAAAAA"
    kwargs = specs[0].run_kwargs("net")
    assert kwargs["image"] == "apache/kafka:4.2.1"
    assert kwargs["ports"] == {"9092/tcp": ("127.0.0.1", 30001)}
    assert kwargs["labels"] == {"kchaos.cluster": "kc", "kchaos.node": "1"}


def test_dedicated_controller_specs():
    spec = ClusterSpec.load({"backend": "docker", "nodes": 2, "dedicated_controllers": 1,
                             "docker": {"image": "my/kafka:dev"}})
    specs = container_specs(spec, "kc", {2: 30002, 3: 30003}, "AAAAAAAAAAAAAAAAAAAAAA")
    roles = {s.node_id: s.environment["KAFKA_PROCESS_ROLES"] for s in specs}
    assert roles == {1: "controller", 2: "broker", 3: "broker"}
    assert specs[0].host_port is None and "ports" not in specs[0].run_kwargs("net")
    assert "KAFKA_ADVERTISED_LISTENERS" not in specs[0].environment
    assert specs[0].image == "my/kafka:dev"
    assert specs[1].environment["KAFKA_CONTROLLER_QUORUM_VOTERS"] == "1@kc-n1:19093"


def test_no_engine_is_a_clear_error_and_stop_is_a_no_op(tmp_path, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    cluster = create_cluster(ClusterSpec.load({"backend": "docker"}), tmp_path)
    assert isinstance(cluster, DockerCluster)
    with pytest.raises(ClusterError, match="no Docker engine answered"):
        cluster.start()
    cluster.stop()  # must not raise
