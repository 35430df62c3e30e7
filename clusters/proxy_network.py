"""A local cluster's links as Toxiproxy proxies, by name: partitions, isolation, heal."""

from __future__ import annotations

from typing import Any

from kchaos.clusters.ports import proxy_name_client, proxy_name_quorum, proxy_name_repl


class ProxyNetwork:
    """Links of a local cluster, by proxy name; every change is undone by :meth:`heal`. A backend
    that cuts its links otherwise (docker.py) overrides ``links_between``, ``cut`` and ``heal``."""

    def __init__(self, cluster: Any):
        self.cluster = cluster
        assert cluster.toxiproxy is not None
        self.client = cluster.toxiproxy

    def links_between(self, side_a: list[int], side_b: list[int]) -> list[str]:
        """Proxy names of every replication and quorum link between the two sides, both directions."""
        names = set(self.client.proxies())
        out = []
        for a in side_a:
            for b in side_b:
                for src, dst in ((a, b), (b, a)):
                    for name in (proxy_name_repl(src, dst), proxy_name_quorum(src, dst)):
                        if name in names:
                            out.append(name)
        return sorted(set(out))

    def cut(self, names: list[str]) -> list[str]:
        """Disable the named link proxies; returns them."""
        for name in names:
            self.client.set_enabled(name, False)
        return names

    def partition(self, side_a: list[int], side_b: list[int]) -> list[str]:
        """Cut every inter-node link between the two sides; returns the proxies disabled."""
        return self.cut(self.links_between(side_a, side_b))

    def isolate(self, node_id: int, include_clients: bool = False) -> list[str]:
        others = [n.node_id for n in self.cluster.nodes if n.node_id != node_id]
        cut = self.partition([node_id], others)
        if include_clients and proxy_name_client(node_id) in self.client.proxies():
            self.client.set_enabled(proxy_name_client(node_id), False)
            cut.append(proxy_name_client(node_id))
        return cut

    def heal(self) -> None:
        self.client.reset()
