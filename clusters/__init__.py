"""Real Kafka clusters: one contract (:class:`Cluster`), three backends, in rooms that say what they hold.

* the contract and what every backend shares: ``base`` (Cluster, Node, capabilities), ``spec``,
  ``client_security``, ``clients``, ``clock_probe``, ``compaction``, ``node_config``;
* ``proxy/``: the message proxy (and its front), its rules, Toxiproxy and the links as its
  proxies, the front's certificates; it imports no module of the contract;
* one package per backend, each importing the contract, ``proxy/`` and the runtime, never another:
  ``local/`` (default: KRaft JVM processes from Maven-resolved jars, Toxiproxy on every link),
  ``docker/`` (``apache/kafka`` containers through the Docker SDK), ``external/`` (an existing
  cluster by bootstrap servers; node faults and partitions through the commands its campaign
  declares: docker, ssh and kubernetes presets);
* this module, the registry: ``BACKENDS``, ``create_cluster`` and what each backend can do.

tests/unit/test_layering.py holds the rooms to that order.
"""

from __future__ import annotations

from pathlib import Path

from kchaos.clusters.base import Capability, Cluster, Node, NodeInfo, Role, coordinator_partition, java_string_hash
from kchaos.clusters.docker import DockerCluster
from kchaos.clusters.external import ExternalCluster
from kchaos.clusters.local import LocalJvmCluster
from kchaos.clusters.spec import ClusterSpec

__all__ = ["BACKENDS", "Capability", "Cluster", "ClusterSpec", "Node", "NodeInfo", "Role", "backend_capabilities", "backend_capability_gap",
           "create_cluster",
           "coordinator_partition", "java_string_hash"]


BACKENDS: dict[str, type[Cluster]] = {"local": LocalJvmCluster, "docker": DockerCluster, "external": ExternalCluster}


def backend_capabilities(spec: ClusterSpec) -> frozenset[Capability]:
    """What the backend ``spec`` names can do, known before it starts (a campaign that needs more
    is refused on load)."""
    return BACKENDS[spec.backend].capabilities_for(spec)  # type: ignore[attr-defined]


def backend_capability_gap(spec: ClusterSpec, capability: Capability) -> str | None:
    """Why the backend ``spec`` names lacks ``capability``, where it can say (the missing command)."""
    return BACKENDS[spec.backend].capability_gap(spec, capability)


def create_cluster(spec: ClusterSpec, work_dir: Path) -> Cluster:
    """The backend ``spec.backend`` names, owning ``work_dir`` (configs, data, logs, pid files)."""
    if spec.backend == "local":
        return LocalJvmCluster(spec, work_dir)
    if spec.backend == "docker":
        return DockerCluster(spec, work_dir)

    return ExternalCluster(spec, work_dir)
