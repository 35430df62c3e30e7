"""Running a rendered node command on this machine (``/bin/sh``, a session of its own), and the
undo of one as the heal journal recorded it: what the external backend does to act on a node
(clusters/external/node_access.py renders the command), and what the reaper does to heal what a dead harness
left on nodes it does not own."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from dataclasses import dataclass
from typing import IO, Any

from kchaos.errors import ClusterError
from kchaos.log import LOGGER

#: how long one node command may take (a graceful stop, or a pod coming back, take longest)
COMMAND_TIMEOUT_S = 360.0
#: after a node command's shell exits, how long its output may take to end (a process it left in
#: the background with the output still open holds it for good)
HELD_OUTPUT_S = 2.0
#: the bytes of a node command's output kept, per pipe (the end, which says why it failed)
OUTPUT_KEPT = 64 * 1024


@dataclass(frozen=True)
class NodeCommand:
    """One rendered command: what it does, on which node, and the shell line that does it."""

    action: str
    node_id: int
    shell: str


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
