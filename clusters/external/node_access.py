"""How kchaos acts on the nodes of a cluster it did not start: each action (kill, terminate, pause,
resume, start, logs, and ``exec``, a shell command on the node) is a command template, from a
preset or from the campaign, rendered for one node here and run on this machine by ``/bin/sh``
(kchaos/runtime/node_commands.py).

Presets (docs/clusters.md has each with a campaign):

* ``docker``: the containers of a Compose project or any engine (``docker kill``, ``pause``,
  ``start``, ``logs``); commands on the node run in the container's network namespace from the
  Docker host (``nsenter``: root on that host, the engine local), so the image needs no iptables
  and the container no ``NET_ADMIN``. For a remote engine, give ``commands.exec`` (``docker exec``
  into a container that has iptables and ``NET_ADMIN``).
* ``ssh``: a JVM on a VM (``ssh TARGET ...``): signals to the processes whose command line holds
  ``process`` (Jepsen's grepkill, with the pattern written so that it never matches the shell that
  runs it), ``systemctl start`` and ``journalctl`` of the node's ``service``.
* ``kubernetes``: Strimzi-style pods (``kubectl delete pod --grace-period=0 --force``; start waits
  for the operator to bring the pod back Ready; ``kubectl logs``). A pod's Kafka process is its
  namespace's PID 1 and its image has no iptables, so pause is refused, and partitions need
  ``netadmin_image`` (``kubectl debug --profile=netadmin``).

A template is a shell command with placeholders ``{target} {host} {node_id} {service} {process}
{options} {netadmin_image}`` (each shell-quoted but ``{options}``, the user's own arguments) and,
for ``exec``, ``{cmd}``. A template that begins ``node:`` is a command on the node, run through
``exec``. An action is available for a node when its template exists and every placeholder it uses
has a value; otherwise the reason names what is missing.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from kchaos.clusters.spec import NODE_ACTIONS, ExternalNodeSpec, ExternalSpec
from kchaos.errors import CapabilityError, ClusterError
from kchaos.runtime.node_commands import NodeCommand

ON_NODE = "node:"
_PLACEHOLDER = re.compile(r"\{(target|host|node_id|service|process|options|netadmin_image|cmd)\}")

_SIGNAL = "pkill -{sig} -f {process}"
#: a graceful stop by signal waits for the process to go (60 s), as systemctl stop does
_TERMINATE = ("pkill -TERM -f {process}; i=0; while pgrep -f {process} >/dev/null; do "
              "i=$((i+1)); [ $i -gt 600 ] && exit 1; sleep 0.1; done")

PRESETS: dict[str, dict[str, str]] = {
    "docker": {
        "kill": "docker {options} kill --signal KILL {target}",
        "terminate": "docker {options} stop --time 30 {target}",
        "pause": "docker {options} pause {target}",
        "resume": "docker {options} unpause {target}",
        "start": "docker {options} start {target}",
        "logs": "docker {options} logs {target}",
        "exec": "nsenter -t \"$(docker {options} inspect -f '{{.State.Pid}}' {target})\" -n sh -c {cmd}",
    },
    "ssh": {
        "exec": "ssh {options} {target} {cmd}",
        "kill": ON_NODE + " " + _SIGNAL.format(sig="KILL", process="{process}"),
        "terminate": ON_NODE + " " + _TERMINATE,
        "pause": ON_NODE + " " + _SIGNAL.format(sig="STOP", process="{process}"),
        "resume": ON_NODE + " " + _SIGNAL.format(sig="CONT", process="{process}"),
        "start": ON_NODE + " systemctl start {service}",
        "logs": ON_NODE + " journalctl -u {service} --no-pager -o short-iso",
    },
    "kubernetes": {
        "kill": "kubectl {options} delete pod {target} --grace-period=0 --force --wait=false",
        "terminate": "kubectl {options} delete pod {target} --wait=true",
        # the operator recreates the pod (StrimziPodSet); wait for it to exist, then to be Ready
        "start": ("i=0; until kubectl {options} get pod {target} >/dev/null 2>&1; do i=$((i+1)); "
                  "[ $i -gt 300 ] && exit 1; sleep 1; done; "
                  "kubectl {options} wait --for=condition=Ready pod/{target} --timeout=300s"),
        "logs": "kubectl {options} logs {target}",
        "exec": ("kubectl {options} debug {target} --profile=netadmin --image={netadmin_image} --attach=true "
                 "--quiet -- sh -c {cmd}"),
    },
    "commands": {},
    "none": {},
}

#: why a preset lacks an action, where that needs saying
PRESET_GAPS: dict[tuple[str, str], str] = {
    ("kubernetes", "pause"): "a pod's Kafka process is PID 1 of its namespace and ignores a SIGSTOP sent from "
                             "`kubectl exec` (pid_namespaces(7)); give commands.pause and commands.resume for a node "
                             "agent that can signal it from the host",
    ("kubernetes", "resume"): "see pause",
    ("kubernetes", "exec"): "Strimzi's pods have no iptables and no NET_ADMIN: set netadmin_image (an image with "
                            "iptables, for `kubectl debug --profile=netadmin`, which the namespace's pod security "
                            "must admit) or give commands.exec",
}


def grep_pattern(pattern: str) -> str:
    """``pattern`` as an extended regular expression that matches itself nowhere: its first
    letter in brackets, so ``pkill -f`` never signals the shell (or ssh session) that runs it."""
    escaped = re.sub(r"([\\^$*+?()|{}\[\]])", r"\\\1", pattern)
    for i, char in enumerate(escaped):
        if char.isalnum() and (i == 0 or escaped[i - 1] != "\\"):
            return f"{escaped[:i]}[{char}]{escaped[i + 1:]}"
    raise ValueError(f"process pattern {pattern!r} needs a letter or digit")


class NodeAccess:
    """The commands of one external cluster's nodes (``spec.access`` and ``spec.commands``)."""

    def __init__(self, spec: ExternalSpec):
        self.spec = spec
        self.templates = {**PRESETS[spec.access], **spec.commands}
        self.nodes = {n.id: n for n in spec.nodes}

    def node(self, node_id: int) -> ExternalNodeSpec:
        try:
            return self.nodes[node_id]
        except KeyError:
            raise ClusterError(f"node {node_id} is not declared in [[cluster.external.nodes]]") from None

    def _values(self, node: ExternalNodeSpec) -> dict[str, str | None]:
        process = getattr(node, "process", None) or self.spec.process
        return {"target": node.target, "host": node.host, "node_id": str(node.id), "service": node.service,
                "process": grep_pattern(process), "options": self.spec.options,
                "netadmin_image": self.spec.netadmin_image}

    def missing(self, action: str, node_id: int) -> str | None:
        """Why ``action`` cannot be rendered for the node (None: it can)."""
        assert action in NODE_ACTIONS, action
        template = self.templates.get(action)
        if template is None:
            gap = PRESET_GAPS.get((self.spec.access, action))
            return (f"the {self.spec.access} access has no {action!r} command"
                    + (f": {gap}" if gap else f" (give cluster.external.commands.{action})"))
        values = self._values(self.node(node_id))
        for name in _PLACEHOLDER.findall(template):
            if name != "cmd" and values.get(name) is None:
                field = {"service": "nodes[].service", "netadmin_image": "netadmin_image"}.get(name, name)
                return f"the {action!r} command of node {node_id} needs {field} (its template uses {{{name}}})"
        if template.startswith(ON_NODE):
            why = self.missing("exec", node_id)
            if why is not None:
                return f"the {action!r} command runs on the node, and {why}"
        return None

    def render(self, action: str, node_id: int, cmd: str | None = None) -> NodeCommand:
        """``action`` for the node as one shell line (``cmd``: the node command of ``exec``)."""
        why = self.missing(action, node_id)
        if why is not None:
            raise CapabilityError(why, "declare the command in [cluster.external.commands] (docs/clusters.md)")
        template = self.templates[action]
        if template.startswith(ON_NODE):
            inner = _fill(template[len(ON_NODE):].strip(), self._values(self.node(node_id)), None)
            return NodeCommand(action, node_id, self.render("exec", node_id, cmd=inner).shell)
        if "{cmd}" in template and cmd is None:
            raise ClusterError(f"the {action!r} command needs a node command")
        return NodeCommand(action, node_id, _fill(template, self._values(self.node(node_id)), cmd))


def _fill(template: str, values: dict[str, str | None], cmd: str | None) -> str:
    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name == "options":
            return values["options"] or ""
        if name == "cmd":
            return shlex.quote(cmd or "")
        return shlex.quote(values[name] or "")

    return _PLACEHOLDER.sub(value, template)


def describe(access: NodeAccess, node_ids: list[int]) -> dict[str, Any]:
    """Per action, the nodes it is available for, and why not for the others (``cluster status``
    and the capability refusals)."""
    out: dict[str, Any] = {}
    for action in NODE_ACTIONS:
        gaps = {nid: access.missing(action, nid) for nid in node_ids}
        out[action] = {"available": sorted(n for n, why in gaps.items() if why is None),
                       "missing": {n: why for n, why in gaps.items() if why is not None}}
    return out
