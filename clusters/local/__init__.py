"""The local backend: KRaft nodes as JVM processes on this machine, Toxiproxy on every link
(``cluster``), and the ports chosen once at start (``port_plan``)."""

from kchaos.clusters.local.cluster import LocalJvmCluster

__all__ = ["LocalJvmCluster"]
