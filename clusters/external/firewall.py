"""Partitions on nodes kchaos does not own: iptables rules in a chain of its own, ``KCHAOS``,
reached by one jump from INPUT and one from OUTPUT, run on the node through its ``exec`` command.

Healing removes the jumps and the chain, and nothing else: Jepsen's heal flushes every chain
(``iptables -F``), which on a shared host would take Docker's, kube-proxy's and the firewall's
rules with it. Every command here is idempotent (a missing chain is a healed node), so a heal that
runs twice, or after the node restarted, is harmless. A rule drops every packet between this node
and one peer's address: the harness's own connections (ssh, the Docker socket, the kube API, the
clients) come from other addresses and pass."""

from __future__ import annotations

import ipaddress
import shlex

CHAIN = "KCHAOS"


def _iptables(host: str) -> str:
    try:
        return "ip6tables" if ipaddress.ip_address(host).version == 6 else "iptables"
    except ValueError:  # a name: iptables resolves it when the rule is added
        return "iptables"


def cut_peer(peer: str) -> str:
    """On a node: drop everything to and from ``peer`` (its chain and jumps made first)."""
    ipt = _iptables(peer)
    q = shlex.quote(peer)
    return (f"{ipt} -w -N {CHAIN} 2>/dev/null; "
            f"for hook in INPUT OUTPUT; do {ipt} -w -C $hook -j {CHAIN} 2>/dev/null || {ipt} -w -I $hook -j {CHAIN} "
            f"|| exit 1; done; "
            f"{ipt} -w -C {CHAIN} -s {q} -j DROP 2>/dev/null || {ipt} -w -A {CHAIN} -s {q} -j DROP || exit 1; "
            f"{ipt} -w -C {CHAIN} -d {q} -j DROP 2>/dev/null || {ipt} -w -A {CHAIN} -d {q} -j DROP")


def remove_chain() -> str:
    """On a node: the jumps to ``KCHAOS`` and the chain itself gone, for both address families;
    succeeds when there was nothing to remove. Fails only when a rule it should remove stays."""
    parts = []
    for ipt in ("iptables", "ip6tables"):
        parts.append(f"if command -v {ipt} >/dev/null; then "
                     f"for hook in INPUT OUTPUT; do while {ipt} -w -D $hook -j {CHAIN} 2>/dev/null; do :; done; done; "
                     f"{ipt} -w -F {CHAIN} 2>/dev/null; {ipt} -w -X {CHAIN} 2>/dev/null; "
                     f"! {ipt} -w -n -L {CHAIN} >/dev/null 2>&1 || exit 1; fi")
    return "; ".join(parts)

