"""Docker backend: ``apache/kafka:<version>`` containers on a user-defined bridge network.

For users who have a Docker engine. Node faults map to container operations (kill, stop,
pause/unpause, restart); a node is cut off by disconnecting it from the network. The
container and network specs are plain data (:func:`container_specs`), unit-tested without an
engine. The image formats storage with the release defaults (TV2 on 4.x); a requested
``transaction_version`` is applied after start with the features API.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kchaos.clusters.base import Capability, Cluster, Node, NodeInfo, Role
from kchaos.clusters.kafka_tools import upgrade_feature
from kchaos.clusters.local import SMALL_MACHINE_DEFAULTS, new_cluster_id
from kchaos.clusters.spec import ClusterSpec
from kchaos.errors import ClusterError, ConfigError, SetupError
from kchaos.waiting import WaitTimeout, wait_until

INTERNAL_PORT = 19092
CONTROLLER_PORT = 19093
CLIENT_PORT = 9092


@dataclass(frozen=True)
class ContainerSpec:
    name: str
    node_id: int
    image: str
    hostname: str
    environment: dict[str, str]
    host_port: int | None          # published CLIENT port on 127.0.0.1 (brokers)
    labels: dict[str, str] = field(default_factory=dict)

    def run_kwargs(self, network: str) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "image": self.image, "name": self.name, "hostname": self.hostname, "detach": True,
            "environment": dict(self.environment), "network": network, "labels": dict(self.labels),
        }
        if self.host_port is not None:
            kwargs["ports"] = {f"{CLIENT_PORT}/tcp": ("127.0.0.1", self.host_port)}
        return kwargs


def _env_name(prop: str) -> str:
    """The apache/kafka image maps KAFKA_<PROPERTY> (dots to underscores, upper case) to properties."""
    return "KAFKA_" + prop.replace(".", "_").replace("-", "_").upper()


def container_specs(spec: ClusterSpec, prefix: str, host_ports: dict[int, int], cluster_id: str) -> list[ContainerSpec]:
    image = spec.docker.image or f"apache/kafka:{spec.kafka_version}"
    ctl = spec.dedicated_controllers
    controllers = list(range(1, ctl + 1)) if ctl else list(range(1, spec.nodes + 1))
    brokers = list(range(ctl + 1, ctl + spec.nodes + 1)) if ctl else list(controllers)
    voters = ",".join(f"{c}@{prefix}-n{c}:{CONTROLLER_PORT}" for c in controllers)
    rf, min_isr, parts = spec.replication_factor, spec.min_insync_replicas, spec.internal_topic_partitions
    out = []
    for nid in sorted(set(controllers) | set(brokers)):
        roles = [r for r, ids in (("broker", brokers), ("controller", controllers)) if nid in ids]
        host = f"{prefix}-n{nid}"
        props: dict[str, str] = {
            "node.id": str(nid),
            "process.roles": ",".join(roles),
            "controller.quorum.voters": voters,
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,INTERNAL:PLAINTEXT,CLIENT:PLAINTEXT",
        }
        listeners = []
        if nid in brokers:
            listeners += [f"INTERNAL://0.0.0.0:{INTERNAL_PORT}", f"CLIENT://0.0.0.0:{CLIENT_PORT}"]
            props["advertised.listeners"] = f"INTERNAL://{host}:{INTERNAL_PORT},CLIENT://127.0.0.1:{host_ports[nid]}"
            props["inter.broker.listener.name"] = "INTERNAL"
        if nid in controllers:
            listeners.append(f"CONTROLLER://0.0.0.0:{CONTROLLER_PORT}")
        props["listeners"] = ",".join(listeners)
        props.update(SMALL_MACHINE_DEFAULTS)
        props.update({
            "default.replication.factor": str(rf), "min.insync.replicas": str(min_isr),
            "offsets.topic.replication.factor": str(rf), "offsets.topic.num.partitions": str(parts),
            "transaction.state.log.replication.factor": str(rf), "transaction.state.log.min.isr": str(min_isr),
            "transaction.state.log.num.partitions": str(parts),
            "share.coordinator.state.topic.replication.factor": str(rf),
            "share.coordinator.state.topic.min.isr": str(min_isr),
            "share.coordinator.state.topic.num.partitions": str(parts),
        })
        props.update(spec.broker)
        env = {_env_name(k): v for k, v in props.items()}
        env["CLUSTER_ID"] = cluster_id
        env["KAFKA_HEAP_OPTS"] = f"-Xms{spec.heap_mb // 2}m -Xmx{spec.heap_mb}m"
        out.append(ContainerSpec(host, nid, image, host, env, host_ports.get(nid),
                                 {"kchaos.cluster": prefix, "kchaos.node": str(nid)}))
    return out


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class DockerNode(Node):
    def __init__(self, cluster: "DockerCluster", spec: ContainerSpec, roles: frozenset[Role]):
        self.cluster = cluster
        self.spec = spec
        self.node_id = spec.node_id
        self.roles = roles

    def _container(self) -> Any:
        return self.cluster.client.containers.get(self.spec.name)

    def kill(self) -> None:
        self._container().kill()

    def terminate(self) -> None:
        self._container().stop(timeout=60)

    def pause(self) -> None:
        self._container().pause()

    def resume(self) -> None:
        self._container().unpause()

    def restart(self) -> None:
        self._container().restart(timeout=60)

    def start(self) -> None:
        self._container().start()

    def disconnect(self) -> None:
        """Cut this node off from every other node (and from clients inside the network)."""
        self.cluster.client.networks.get(self.cluster.network_name).disconnect(self.spec.name)

    def reconnect(self) -> None:
        self.cluster.client.networks.get(self.cluster.network_name).connect(self.spec.name, aliases=[self.spec.hostname])

    def info(self) -> NodeInfo:
        try:
            status = self._container().status
        except Exception:
            status = "missing"
        state = {"running": "running", "paused": "paused"}.get(status, "stopped")
        addr = f"127.0.0.1:{self.spec.host_port}" if self.spec.host_port else None
        return NodeInfo(self.node_id, tuple(sorted(r.value for r in self.roles)), None, state, addr, None, None)


class DockerCluster(Cluster):
    backend_name = "docker"
    capabilities = frozenset({Capability.KILL, Capability.TERMINATE, Capability.PAUSE, Capability.RESTART})

    @classmethod
    def capabilities_for(cls, spec: ClusterSpec) -> frozenset[Capability]:
        return cls.capabilities

    def __init__(self, spec: ClusterSpec, work_dir: Path):
        super().__init__()
        if spec.backend != "docker":
            raise ConfigError(f"DockerCluster needs backend = 'docker', not {spec.backend!r}")
        self.spec = spec
        self.work_dir = Path(work_dir)
        self.kafka_version = spec.kafka_version
        self.prefix = f"kchaos-{self.work_dir.resolve().name}"[:40]
        self.network_name = f"{spec.docker.network}-{self.prefix}"
        self._client: Any = None
        self._nodes: list[DockerNode] = []

    @property
    def client(self) -> Any:
        if self._client is None:
            try:
                import docker
            except ImportError:
                raise SetupError("the docker backend needs the docker SDK", "pip install 'kchaos[docker]'") from None
            try:
                self._client = (docker.DockerClient(base_url=self.spec.docker.docker_host) if self.spec.docker.docker_host
                                else docker.from_env())
                self._client.ping()
            except Exception as exc:
                self._client = None
                raise ClusterError(f"no Docker engine answered ({exc.__class__.__name__})",
                                   "start Docker, set DOCKER_HOST, or use cluster.backend = 'local'") from None
        return self._client

    @property
    def nodes(self) -> list[Node]:  # type: ignore[override]
        return list(self._nodes)

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"127.0.0.1:{n.spec.host_port}" for n in self._nodes if n.is_broker)

    def plan(self) -> list[ContainerSpec]:
        ctl = self.spec.dedicated_controllers
        brokers = range(ctl + 1, ctl + self.spec.nodes + 1) if ctl else range(1, self.spec.nodes + 1)
        return container_specs(self.spec, self.prefix, {b: _free_port() for b in brokers}, new_cluster_id())

    def start(self) -> None:
        self.stop()
        client = self.client
        try:
            client.networks.create(self.network_name, driver="bridge", labels={"kchaos.cluster": self.prefix})
            specs = self.plan()
            self._nodes = []
            for cs in specs:
                roles = frozenset(Role(r) for r in cs.environment["KAFKA_PROCESS_ROLES"].split(","))
                client.containers.run(**cs.run_kwargs(self.network_name))
                self._nodes.append(DockerNode(self, cs, roles))
            expected = {n.node_id for n in self._nodes if n.is_broker}
            wait_until(lambda: expected <= set(self.admin().list_topics(timeout=5).brokers),
                       self.spec.ready_timeout_s, 1.0, "brokers did not register", retry_on=(Exception,))
            if self.spec.transaction_version is not None:
                upgrade_feature(self, "transaction.version", self.spec.transaction_version,
                                downgrade=self.spec.transaction_version < 2)
        except WaitTimeout as exc:
            self.stop()
            raise ClusterError(f"docker cluster not ready: {exc}") from None
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        self._close_admin()
        if self._client is None:
            try:
                self.client
            except (ClusterError, SetupError):
                return  # no SDK or no engine: nothing of ours can be running
        for container in self._client.containers.list(all=True, filters={"label": f"kchaos.cluster={self.prefix}"}):
            try:
                container.remove(force=True)
            except Exception:
                pass
        for network in self._client.networks.list(filters={"label": f"kchaos.cluster={self.prefix}"}):
            try:
                network.remove()
            except Exception:
                time.sleep(0.5)
        self._nodes = []
