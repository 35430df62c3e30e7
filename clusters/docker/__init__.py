"""The Docker backend: Kafka containers on a bridge network (``cluster``), kchaos' own ``dockerd``
where the machine has none (``engine``), and kchaos' Kafka image built from the cached jars
(``image``)."""

from kchaos.clusters.docker.cluster import DockerCluster

__all__ = ["DockerCluster"]
