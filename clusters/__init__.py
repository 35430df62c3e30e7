"""Real Kafka clusters: one contract (:class:`Cluster`), three backends.

* ``local`` (default): KRaft JVM processes from Maven-resolved jars, Toxiproxy on every link.
* ``docker``: ``apache/kafka`` containers through the Docker SDK.
* ``external``: an existing cluster by bootstrap servers; no node faults.
"""

from __future__ import annotations

from pathlib import Path

from kchaos.clusters.base import Capability, Cluster, Node, NodeInfo, Role, coordinator_partition, java_string_hash
from kchaos.clusters.spec import ClusterSpec

__all__ = ["Capability", "Cluster", "ClusterSpec", "Node", "NodeInfo", "Role", "create_cluster",
           "coordinator_partition", "java_string_hash"]


def create_cluster(spec: ClusterSpec, work_dir: Path) -> Cluster:
    """The backend ``spec.backend`` names, owning ``work_dir`` (configs, data, logs, pid files)."""
    if spec.backend == "local":
        from kchaos.clusters.local import LocalJvmCluster

        return LocalJvmCluster(spec, work_dir)
    if spec.backend == "docker":
        from kchaos.clusters.docker import DockerCluster

        return DockerCluster(spec, work_dir)
    from kchaos.clusters.external import ExternalCluster

    return ExternalCluster(spec, work_dir)
