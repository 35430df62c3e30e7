"""Processes the harness starts, tracked so that nothing leaks.

Every process runs in its own process group (``start_new_session``) and gets a pid file
``<name>.pid`` holding ``pid``, ``pgid`` and a *marker* string that must appear in the
process's command line. The marker (a directory path unique to the cluster) protects against
killing an unrelated process that reused the pid: :func:`reap` only signals a process whose
command line still contains it. Process state, command lines and environments are read with
psutil (not /proc by hand: the same code on Linux and macOS, and its zombie and access cases
handled once).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from kchaos.files import atomic_write
from kchaos.waiting import gone_within


#: environment variable naming the harness process that started a process: a harness killed
#: between starting a child and writing its pid file leaves that child findable by its reaper
STARTED_BY = "KCHAOS_STARTED_BY"


def _cmdline(pid: int, settle_s: float = 1.0) -> str | None:
    """The command line of ``pid``; None when it is gone.

    Between fork and exec a child's cmdline reads empty, so an empty one is re-read for up to
    ``settle_s`` before it is believed.
    """
    deadline = time.monotonic() + settle_s
    while True:
        try:
            cmd = " ".join(psutil.Process(pid).cmdline())
        except (psutil.NoSuchProcess, psutil.AccessDenied):  # a zombie is a NoSuchProcess too
            return None
        if cmd or time.monotonic() >= deadline:
            return cmd
        time.sleep(0.02)


def _status(pid: int) -> str | None:
    """psutil's process status (running, sleeping, stopped, zombie...), None when gone."""
    try:
        return psutil.Process(pid).status()
    except psutil.NoSuchProcess:
        return None


def is_alive(pid: int) -> bool:
    return _status(pid) not in (None, psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)


def is_stopped(pid: int) -> bool:
    return _status(pid) in (psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP)


@dataclass
class PidFile:
    path: Path
    pid: int
    pgid: int
    marker: str
    #: the process that started it (a harness); a reaper only kills what its own harness started
    owner: int | None = None

    def write(self) -> None:
        atomic_write(self.path, json.dumps({"pid": self.pid, "pgid": self.pgid, "marker": self.marker,
                                            "owner": self.owner}))

    @classmethod
    def read(cls, path: Path) -> "PidFile | None":
        try:
            data = json.loads(path.read_text())
            owner = data.get("owner")
            return cls(path, int(data["pid"]), int(data["pgid"]), str(data["marker"]),
                       int(owner) if owner is not None else None)
        except (OSError, ValueError, KeyError):
            return None

    def owns_live_process(self) -> bool:
        cmd = _cmdline(self.pid)
        return cmd is not None and self.marker in cmd and is_alive(self.pid)


class ManagedProcess:
    """One child process in its own process group, with a pid file and a log file.

    It is either started here (``start``) or adopted from a pid file written by an earlier
    harness process (``adopt``), so that ``kchaos cluster status/down`` and faults work on a
    cluster left up by ``kchaos cluster up``.
    """

    def __init__(self, name: str, argv: list[str], log_path: Path, pid_dir: Path, marker: str,
                 env: dict[str, str] | None = None, cwd: Path | None = None,
                 identity: tuple[str, ...] | None = None):
        if marker not in " ".join(argv):
            raise ValueError("the marker must appear in the command line so reaping can recognise it")
        if identity is not None and (not _holds(argv, identity) or marker not in " ".join(identity)):
            raise ValueError("the identity must be arguments of the command line, and hold the marker")
        self.name = name
        #: arguments only this process's command line holds, in a row (a node's main class and its
        #: config file): a process started again by someone else (a node command of an external
        #: campaign, an operator) is found by them when the pid file names a process that is gone.
        #: Whole arguments, so that the shell line that started it (`sh -c "java ... &"`) is not it
        self.identity = identity
        #: whether the process leads a process group of its own, which signals then reach whole
        #: (what start() makes); one started by someone else may share its starter's group
        self._own_group = True
        self.argv = argv
        self.log_path = log_path
        self.pid_path = pid_dir / f"{name}.pid"
        self.marker = marker
        self.env = env
        self.cwd = cwd
        self._popen: subprocess.Popen | None = None
        self._pid: int | None = None
        self._last_returncode: int | None = None

    @property
    def pid(self) -> int | None:
        return self._pid

    def adopt(self) -> bool:
        """Take over the process recorded in our pid file, if it is still ours and alive; else, with
        an ``identity``, the one live process whose command line holds it (started again by
        someone else since the pid file was written), and record it in the pid file."""
        entry = PidFile.read(self.pid_path)
        if entry is not None and entry.owns_live_process():
            self._pid, self._own_group = entry.pid, entry.pgid == entry.pid
            return True
        found = processes_with_args(self.identity) if self.identity is not None else []
        if len(found) != 1:
            return False
        pid = found[0]
        try:
            pgid = os.getpgid(pid)
        except ProcessLookupError:
            return False
        self._pid, self._own_group = pid, pgid == pid
        self.pid_path.parent.mkdir(parents=True, exist_ok=True)
        PidFile(self.pid_path, pid, pgid, self.marker, None).write()
        return True

    def start(self) -> None:
        if self.is_running():
            raise RuntimeError(f"{self.name} is already running (pid {self.pid})")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.pid_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")
        try:
            self._popen = subprocess.Popen(
                self.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env={**(self.env if self.env is not None else os.environ), STARTED_BY: str(os.getpid())},
                cwd=self.cwd, start_new_session=True,
            )
        finally:
            log.close()
        self._pid, self._own_group = self._popen.pid, True
        PidFile(self.pid_path, self._pid, self._pid, self.marker, os.getpid()).write()

    def is_running(self) -> bool:
        """Alive (running or paused)."""
        if self._pid is None:
            return False
        if self._popen is not None:
            return self._popen.poll() is None
        cmd = _cmdline(self._pid)
        return cmd is not None and self.marker in cmd and is_alive(self._pid)

    def returncode(self) -> int | None:
        """Exit status of the last process started here (negative: killed by that signal)."""
        return self._popen.poll() if self._popen else self._last_returncode

    def signal(self, sig: int) -> None:
        if not self.is_running():
            return
        _send(self._pid, sig, self._own_group)  # type: ignore[arg-type]

    def _wait_gone(self, timeout_s: float) -> bool:
        if self._popen is not None:
            try:
                self._popen.wait(timeout=timeout_s)
                return True
            except subprocess.TimeoutExpired:
                return False
        return gone_within(self.is_running, timeout_s, 0.05)

    def kill(self) -> None:
        """SIGKILL the whole process group and reap it."""
        if self._pid is None:
            return
        self.signal(signal.SIGCONT)  # a stopped group would otherwise linger
        self.signal(signal.SIGKILL)
        self._wait_gone(15)
        self._forget()

    def terminate(self, timeout_s: float = 30.0) -> bool:
        """SIGTERM, wait up to ``timeout_s``, then SIGKILL. Returns True when it exited by itself."""
        if self._pid is None:
            return True
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        clean = self._wait_gone(timeout_s)
        if not clean:
            self.kill()
        self._forget()
        return clean

    def pause(self) -> None:
        self.signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.signal(signal.SIGCONT)

    def is_paused(self) -> bool:
        return self._pid is not None and is_stopped(self._pid)

    def forget_if_exited(self) -> bool:
        """For a process that ended on its own: collect its status and remove its pid file."""
        if self._pid is not None and not self.is_running():
            self._forget()
            return True
        return False

    def _forget(self) -> None:
        # Children of the process (none today) must not outlive it: kill the whole group.
        if self._pid is not None and self._own_group:
            _send(self._pid, signal.SIGKILL, True)
        if self._popen is not None:
            self._last_returncode = self._popen.poll()
        self._pid = None
        self._popen = None
        try:
            self.pid_path.unlink()
        except FileNotFoundError:
            pass


def _send(pid: int, sig: int, group: bool) -> None:
    """``sig`` to the process group ``pid`` leads, or to the process alone: a process kchaos did not
    start may share a group with what started it (a shell, or the harness itself)."""
    try:
        if group:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except ProcessLookupError:
        pass
    except PermissionError:
        if group:
            os.kill(pid, sig)


def reap(directory: Path, timeout_s: float = 10.0, owner: int | None = None) -> list[int]:
    """Kill every process recorded by a pid file under ``directory`` that still belongs to it
    (and, with ``owner``, was started by that harness process: a run's reaper must not kill
    what a later ``kchaos analyze`` on the same directory started). With ``owner``, also what
    that harness started and had no time to record: a process carrying the directory in its
    command line and ``STARTED_BY=owner`` in its environment.

    Used by ``kchaos cluster down`` after a crashed harness, and as a last resort by stop().
    Returns the pids that were killed.
    """
    killed: list[int] = []
    for pid_path in sorted(directory.rglob("*.pid")):
        entry = PidFile.read(pid_path)
        if entry is None:
            pid_path.unlink(missing_ok=True)
            continue
        if owner is not None and entry.owner is not None and entry.owner != owner:
            continue
        if entry.owns_live_process():
            for sig in (signal.SIGCONT, signal.SIGKILL):
                _send(entry.pid, sig, entry.pgid == entry.pid)
            killed.append(entry.pid)
        pid_path.unlink(missing_ok=True)
    if owner is not None:
        # started, but no pid file written yet (one just killed above may still be listed)
        for pid in (p for p in started_by(owner, str(directory)) if p not in killed):
            for sig in (signal.SIGCONT, signal.SIGKILL):
                try:
                    os.killpg(os.getpgid(pid), sig)
                except (ProcessLookupError, PermissionError):
                    pass
            killed.append(pid)
    gone_within(lambda: any(is_alive(p) for p in killed), timeout_s, 0.05)
    return killed


def started_by(owner: int, marker: str) -> list[int]:
    """Live processes whose command line carries ``marker`` and whose environment says harness
    ``owner`` started them (ManagedProcess.start), pid file or not."""
    found = []
    for pid in processes_with_marker(marker):
        try:
            if psutil.Process(pid).environ().get(STARTED_BY) == str(owner):
                found.append(pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def live_processes(directory: Path) -> list[int]:
    """Pids recorded under ``directory`` whose process is still alive and still ours."""
    pids = []
    for pid_path in directory.rglob("*.pid"):
        entry = PidFile.read(pid_path)
        if entry is not None and entry.owns_live_process():
            pids.append(entry.pid)
    return pids


def _holds(argv: list[str], args: tuple[str, ...]) -> bool:
    """Whether ``args`` are arguments of ``argv``, in a row."""
    return any(tuple(argv[i:i + len(args)]) == args for i in range(len(argv) - len(args) + 1))


def processes_with_args(args: tuple[str, ...]) -> list[int]:
    """Every live process on the machine whose arguments hold ``args`` in a row."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        if _holds(proc.info["cmdline"] or [], args) and is_alive(proc.pid):
            found.append(proc.pid)
    return found


def processes_with_marker(marker: str) -> list[int]:
    """Every live process on the machine whose command line contains ``marker`` (leak checks)."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmd = " ".join(proc.info["cmdline"] or [])
        if marker in cmd and is_alive(proc.pid):
            found.append(proc.pid)
    return found
