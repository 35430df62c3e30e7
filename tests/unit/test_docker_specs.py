"""Docker backend: the generated container specs (no engine needed) and a clean skip/error without one."""

import pytest

from kchaos.clusters import ClusterSpec, create_cluster
from kchaos.clusters.docker.cluster import DockerCluster, container_specs
from kchaos.errors import ClusterError, ConfigError


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


def test_clients_are_told_the_proxy_ports_and_the_image_formats_with_the_features():
    spec = ClusterSpec.load({"backend": "docker", "nodes": 2, "transaction_version": 1})
    specs = container_specs(spec, "kc", {1: 30001, 2: 30002}, "AAAAAAAAAAAAAAAAAAAAAA", image="kchaos/kafka:4.2.1",
                            advertised_ports={1: 40001, 2: 40002}, format_features={"transaction.version": 1})
    env = specs[0].environment
    assert env["KAFKA_ADVERTISED_LISTENERS"] == "INTERNAL://kc-n1:19092,CLIENT://127.0.0.1:40001"
    assert specs[0].run_kwargs("net")["ports"] == {"9092/tcp": ("127.0.0.1", 30001)}  # the proxy's upstream
    assert env["KCHAOS_FORMAT_FEATURES"] == "transaction.version=1"
    assert env["KCHAOS_CONTAINER"] == "kc-n1" and env["KAFKA_LOG_DIRS"] == "/var/lib/kafka/data"


def test_capabilities_are_stated_before_start():
    from kchaos.clusters import Capability, backend_capabilities

    caps = backend_capabilities(ClusterSpec.load({"backend": "docker"}))
    assert caps == {Capability.KILL, Capability.TERMINATE, Capability.PAUSE, Capability.RESTART, Capability.NETWORK,
                    Capability.PARTITION, Capability.UPGRADE}
    assert Capability.NETWORK not in backend_capabilities(ClusterSpec.load({"backend": "docker", "proxy_clients": False}))
    # message faults on the client path: the message proxy behind the client proxies
    assert Capability.MESSAGES in backend_capabilities(ClusterSpec.load({"backend": "docker", "proxy_messages": True}))
    with pytest.raises(ConfigError, match="proxy_messages needs proxy_clients"):
        ClusterSpec.load({"backend": "docker", "proxy_messages": True, "proxy_clients": False})
    with pytest.raises(ConfigError, match="link = 'inter-broker' need backend = 'local'"):
        ClusterSpec.load({"backend": "docker", "proxy_messages": True, "proxy_messages_between_brokers": True})


def test_a_machine_without_an_engine_gets_the_fix_named_before_anything_starts(monkeypatch):
    import kchaos.clusters.docker.cluster as docker_backend
    from kchaos.errors import SetupError

    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.setattr(docker_backend, "missing_binaries", lambda: ["dockerd", "containerd"])
    spec = ClusterSpec.load({"backend": "docker", "docker": {"engine": "private"}})
    with pytest.raises(SetupError) as caught:
        DockerCluster.preflight(spec)
    assert "dockerd, containerd not installed" in caught.value.cause and "kchaos setup --docker" in caught.value.fix
    DockerCluster.preflight(ClusterSpec.load({"backend": "docker", "docker": {"docker_host": "tcp://10.0.0.1:2375"}}))


def test_a_data_directory_archive_is_renamed_to_its_path_from_the_root():
    """What get_archive gives of /var/lib/kafka/data (members under "data/") goes back in with
    put_archive("/") into a new container where /var/lib/kafka may not exist."""
    import io
    import tarfile

    from kchaos.clusters.docker.cluster import DATA_DIR, relocated_archive

    src = io.BytesIO()
    with tarfile.open(fileobj=src, mode="w") as tar:
        directory = tarfile.TarInfo("data")
        directory.type = tarfile.DIRTYPE
        tar.addfile(directory)
        body = b"cluster.id=abc\n"
        meta = tarfile.TarInfo("data/meta.properties")
        meta.size = len(body)
        tar.addfile(meta, io.BytesIO(body))
    out = relocated_archive(src.getvalue(), DATA_DIR)
    with tarfile.open(fileobj=io.BytesIO(out)) as tar:
        assert tar.getnames() == ["var/lib/kafka/data", "var/lib/kafka/data/meta.properties"]
        assert tar.extractfile("var/lib/kafka/data/meta.properties").read() == body  # type: ignore[union-attr]
