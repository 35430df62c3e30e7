"""The external backend: a cluster kchaos did not start (``cluster``), acted on through node
commands rendered from presets or templates (``node_access``) and partitioned by iptables rules in
the nodes' own chain (``firewall``)."""

from kchaos.clusters.external.cluster import ExternalCluster, heal_run

__all__ = ["ExternalCluster", "heal_run"]
