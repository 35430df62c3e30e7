"""An existing cluster reached by its bootstrap servers.

kchaos does not own its nodes: node faults are unavailable (and say so), network faults too.
Workloads, role look-ups and verification work through the client protocol.
"""

from __future__ import annotations

from pathlib import Path

from kchaos.clusters.base import Capability, Cluster, Node, NodeInfo, Role
from kchaos.clusters.spec import ClusterSpec
from kchaos.errors import ClusterError, ConfigError


class ExternalNode(Node):
    def __init__(self, node_id: int, host: str, port: int):
        self.node_id = node_id
        self.roles = frozenset({Role.BROKER})
        self.host, self.port = host, port

    def info(self) -> NodeInfo:
        return NodeInfo(self.node_id, ("broker",), None, "unknown", f"{self.host}:{self.port}", None, None)


class ExternalCluster(Cluster):
    backend_name = "external"
    capabilities = frozenset()  # no kill, pause, restart or network: kchaos does not own the nodes

    @classmethod
    def capabilities_for(cls, spec: ClusterSpec) -> frozenset[Capability]:
        return cls.capabilities

    def __init__(self, spec: ClusterSpec, work_dir: Path | None = None):
        super().__init__()
        if spec.backend != "external" or spec.external is None:
            raise ConfigError("ExternalCluster needs backend = 'external' and [cluster.external]")
        self.spec = spec
        self.kafka_version = spec.kafka_version  # used to pick the admin tools' jars
        self._nodes: list[ExternalNode] = []

    @property
    def bootstrap_servers(self) -> str:
        assert self.spec.external is not None
        return self.spec.external.bootstrap_servers

    def client_config(self) -> dict[str, str]:
        assert self.spec.external is not None
        return {**self.spec.external.resolved_client_config(), "bootstrap.servers": self.bootstrap_servers}

    @property
    def nodes(self) -> list[Node]:  # type: ignore[override]
        return list(self._nodes)

    def start(self) -> None:
        """Connect and list the brokers; nothing is started."""
        try:
            md = self.admin().list_topics(timeout=15)
        except Exception as exc:
            raise ClusterError(f"external cluster at {self.bootstrap_servers} did not answer: {exc}",
                               "check cluster.external.bootstrap_servers and the client security settings") from None
        self._nodes = [ExternalNode(b.id, b.host, b.port) for b in sorted(md.brokers.values(), key=lambda b: b.id)]
        if not self._nodes:
            raise ClusterError(f"external cluster at {self.bootstrap_servers} reported no brokers")

    def stop(self) -> None:
        self._close_admin()
