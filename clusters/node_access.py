"""How kchaos acts on the nodes of a cluster it did not start: each action (kill, terminate, pause,
resume, start, logs, and ``exec``, a shell command on the node) is a command template, from a
preset or from the campaign, rendered for one node and run on this machine by ``/bin/sh``.

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

import os
import re
import shlex
import signal
import subprocess
import threading
from dataclasses import dataclass
from typing import IO, Any

from kchaos.clusters.spec import NODE_ACTIONS, ExternalNodeSpec, ExternalSpec
from kchaos.errors import CapabilityError, ClusterError
from kchaos.log import LOGGER

#: how long one node command may take (a graceful stop, or a pod coming back, take longest)
COMMAND_TIMEOUT_S = 360.0
#: after a node command's shell exits, how long its output may take to end (a process it left in
#: the background with the output still open holds it for good)
HELD_OUTPUT_S = 2.0
#: the bytes of a node command's output kept, per pipe (the end, which says why it failed)
OUTPUT_KEPT = 64 * 1024
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


@dataclass(frozen=True)
class NodeCommand:
    """One rendered command: what it does, on which node, and the shell line that does it."""

    action: str
    node_id: int
    shell: str


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


class _Output:
    """What a command writes to one of its pipes, read by a thread of its own until the pipe's end
    (its last ``OUTPUT_KEPT`` bytes). A process the command left in the background still holding
    the pipe keeps it open: then the reader drains it for as long as the harness lives, so that
    the process never blocks on a full pipe."""

    def __init__(self, pipe: IO[bytes]):
        self.pipe = pipe
        self.chunks: list[bytes] = []
        self.closed = threading.Event()
        threading.Thread(target=self._read, daemon=True, name="node-command-output").start()

    def _read(self) -> None:
        kept = 0
        while chunk := self.pipe.read1(65536):
            self.chunks.append(chunk)
            kept += len(chunk)
            while kept > OUTPUT_KEPT and len(self.chunks) > 1:
                kept -= len(self.chunks.pop(0))
        self.pipe.close()
        self.closed.set()

    def text(self) -> str:
        return b"".join(self.chunks).decode(errors="replace")


def run_command(command: NodeCommand, check: bool = True, timeout_s: float = COMMAND_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    """Run one rendered command on this machine; a failure (``check``) names the node, the action and
    what the command said.

    The command runs in a session of its own, so that a Ctrl-C on kchaos never reaches a broker it
    started. It is done when its shell exits, not when its output ends: a ``start`` that leaves a
    process in the background with the command's own output (``java ... &``, no redirection)
    would otherwise hold the pipe open, and the wait would last until the timeout. Such a
    command's output is read for ``HELD_OUTPUT_S`` more, then kchaos goes on and warns."""
    # a session of its own: what the command starts (a broker, in the background) is out of the
    # harness's process group, so a Ctrl-C on kchaos never reaches it
    proc = subprocess.Popen(["/bin/sh", "-c", command.shell], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    assert proc.stdout is not None and proc.stderr is not None
    out, err = _Output(proc.stdout), _Output(proc.stderr)
    try:
        code = proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the command and whatever it is still waiting on
        except ProcessLookupError:
            pass
        proc.wait()
        raise ClusterError(f"{command.action} of node {command.node_id} did not finish in {timeout_s:.0f}s",
                           f"the command was: {command.shell}") from None
    held = not (out.closed.wait(HELD_OUTPUT_S) and err.closed.wait(HELD_OUTPUT_S))
    if held:
        LOGGER.warning(f"the {command.action} command of node {command.node_id} ended, but left a process holding its "
                    f"output (in the background, not redirected); kchaos did not wait for it. Redirect that "
                    f"process's output in the template ('> FILE 2>&1 < /dev/null &'): it writes into a pipe that "
                    f"closes when kchaos exits")
    proc = subprocess.CompletedProcess(proc.args, code, out.text(), err.text())
    if check and proc.returncode != 0:
        said = (proc.stderr.strip() or proc.stdout.strip())[-600:]
        raise ClusterError(f"{command.action} of node {command.node_id} failed (exit {proc.returncode}): {said}",
                           f"the command was: {command.shell}")
    return proc


def run_undo(undo: dict[str, Any]) -> tuple[bool, str]:
    """Run an undo command as the heal journal recorded it: whether it worked, and what it said."""
    try:
        proc = run_command(NodeCommand(undo["action"], undo["node"], undo["shell"]), check=False)
    except ClusterError as exc:
        return False, exc.one_line()
    return proc.returncode == 0, (proc.stdout + proc.stderr).strip()


def describe(access: NodeAccess, node_ids: list[int]) -> dict[str, Any]:
    """Per action, the nodes it is available for, and why not for the others (``cluster status``
    and the capability refusals)."""
    out: dict[str, Any] = {}
    for action in NODE_ACTIONS:
        gaps = {nid: access.missing(action, nid) for nid in node_ids}
        out[action] = {"available": sorted(n for n, why in gaps.items() if why is None),
                       "missing": {n: why for n, why in gaps.items() if why is not None}}
    return out
