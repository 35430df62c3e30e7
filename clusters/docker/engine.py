"""A private Docker engine: ``dockerd`` started by kchaos on its own socket, for a machine that has
the engine's binaries and no running daemon (a CI runner, this project's own test machine).

Why private: kchaos must not depend on, or disturb, a daemon the user runs, and everything it
starts must end with it. The engine is a :class:`ManagedProcess` with its pid file in the
cluster's pid directory, so ``stop()``, Ctrl-C and the crash reaper treat it like a broker. Its
data root lives in the cache (locally built images survive between runs; one engine at a time
uses it, under a lock); its exec root and socket live in a short per-cluster directory under
``/tmp`` (containerd's socket paths must stay under the kernel's 108-byte limit).

The storage driver is ``vfs``: it works on any file system and in a container, at the price of a
full copy of the image per container (about 0.6 GB for the Kafka image).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from kchaos.errors import ClusterError, SetupError
from kchaos.paths import cache_dir
from kchaos.runtime.debian import apt_install, can_install
from kchaos.runtime.processes import ManagedProcess
from kchaos.waiting import WaitTimeout, wait_until

#: what a machine needs for a private engine, and the Debian packages that provide it
ENGINE_BINARIES = ("dockerd", "containerd", "runc", "iptables", "nsenter")
ENGINE_PACKAGES = ("docker.io", "debootstrap", "iptables", "util-linux")
INSTALL_HINT = "run `kchaos setup --docker` (installs Debian's docker.io as root), or point cluster.docker.docker_host at an engine"


def missing_binaries() -> list[str]:
    return [b for b in ENGINE_BINARIES if not shutil.which(b)]


def install_engine() -> list[str]:
    """Install the engine's Debian packages where binaries are missing (root, apt). Returns what was
    installed; raises SetupError naming the fix when it cannot."""
    missing = missing_binaries() + ([] if shutil.which("debootstrap") else ["debootstrap"])
    if not missing:
        return []
    if not can_install():
        raise SetupError(f"the private Docker engine needs {', '.join(missing)}",
                         "install Debian's packages " + " ".join(ENGINE_PACKAGES) + " as root")
    proc = apt_install(ENGINE_PACKAGES)
    if proc.returncode != 0 or missing_binaries():
        raise SetupError("installing the Docker engine failed", "read apt-get's output below",
                         detail=(proc.stdout + proc.stderr)[-3000:])
    return list(ENGINE_PACKAGES)


def engine_home() -> Path:
    return cache_dir() / "docker"


class PrivateDockerEngine:
    """One ``dockerd`` owned by one cluster. ``start()`` waits until it answers; ``stop()`` removes
    every container and network kchaos made in it, then ends the daemon (idempotent)."""

    def __init__(self, owner_dir: Path, pid_dir: Path):
        self.owner_dir = Path(owner_dir).resolve()
        tag = hashlib.sha1(str(self.owner_dir).encode()).hexdigest()[:10]
        self.exec_root = Path(f"/tmp/kchaos-dockerd-{tag}")
        self.socket = self.exec_root / "docker.sock"
        self.data_root = engine_home() / "data"
        self.log_path = self.owner_dir / "dockerd" / "dockerd.log"
        self._lock_fd: int | None = None
        self.process = ManagedProcess(
            "dockerd",
            ["dockerd", "--storage-driver=vfs", "--data-root", str(self.data_root), "--exec-root", str(self.exec_root),
             "--pidfile", str(self.exec_root / "dockerd.pid"), "-H", f"unix://{self.socket}",
             "--log-level", "warn", "--iptables=true"],
            self.log_path, pid_dir, marker=str(self.exec_root))

    @property
    def docker_host(self) -> str:
        return f"unix://{self.socket}"

    def _lock(self) -> None:
        self.data_root.mkdir(parents=True, exist_ok=True)
        fd = os.open(engine_home() / "engine.lock", os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise ClusterError(f"another private Docker engine uses {self.data_root}",
                               "wait for the other docker-backend run to end (one at a time per machine)") from None
        self._lock_fd = fd

    def _unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def start(self) -> Any:
        """Start the daemon and return a docker SDK client connected to it."""
        missing = missing_binaries()
        if missing:
            raise SetupError(f"no Docker engine here: {', '.join(missing)} not installed", INSTALL_HINT)
        import docker

        self._lock()
        try:
            # under the lock no other private engine runs: an exec root left here is a crashed one's
            for stale in Path("/tmp").glob("kchaos-dockerd-*"):
                remove_exec_root(stale)
            remember_host_forwarding()
            self.exec_root.mkdir(parents=True, exist_ok=True)
            self.process.start()
            clients: list[Any] = []

            def answers() -> bool:
                if not self.process.is_running():
                    raise ClusterError("dockerd exited during start-up", "read its log",
                                       detail=self.log_path.read_text(errors="replace")[-3000:])
                if not clients:  # the SDK asks the daemon's API version as it is made
                    clients.append(docker.DockerClient(base_url=self.docker_host, timeout=120))
                return bool(clients[0].ping())

            wait_until(answers, 60, 0.2, "dockerd did not answer on its socket", retry_on=(Exception,),
                       give_up_on=(ClusterError,))
            client = clients[0]
            remove_kchaos_objects(client)  # a crashed run's leftovers (this engine is kchaos' own)
            return client
        except WaitTimeout as exc:
            self.stop()
            raise ClusterError(str(exc), detail=self.log_path.read_text(errors="replace")[-3000:]) from None
        except BaseException:
            self.stop()
            raise

    def stop(self, client: Any = None) -> None:
        if client is not None and self.process.is_running():
            try:
                remove_kchaos_objects(client)
            except Exception:
                pass  # the daemon's end below stops what it runs
        self.process.terminate(timeout_s=30)
        remove_exec_root(self.exec_root)
        if self._lock_fd is not None:  # this engine ran: the host's forwarding as it was before
            restore_host_forwarding()
        self._unlock()


#: the host's forwarding before the first private engine started: dockerd turns IPv4 forwarding on
#: and sets the FORWARD chain's policy to DROP, which (with br_netfilter, which it loads) drops the
#: bridged traffic of every other bridge on the host; kept in a file so that a crashed engine's
#: successor still knows the original
FORWARDING_FILE = "host-forwarding"


def _forward_policy() -> str | None:
    proc = subprocess.run(["iptables", "-w", "-S", "FORWARD"], capture_output=True, text=True)
    first = proc.stdout.splitlines()[0] if proc.returncode == 0 and proc.stdout.strip() else ""
    return first.split()[2] if first.startswith("-P FORWARD") else None


def remember_host_forwarding() -> None:
    path = engine_home() / FORWARDING_FILE
    if path.exists():
        return  # a crashed engine's: it holds the host's original
    policy = _forward_policy()
    try:
        ip_forward = Path("/proc/sys/net/ipv4/ip_forward").read_text().strip()
    except OSError:
        ip_forward = ""
    if policy:
        path.write_text(f"{policy} {ip_forward}\n")


def restore_host_forwarding() -> None:
    path = engine_home() / FORWARDING_FILE
    try:
        policy, *rest = path.read_text().split()
    except (OSError, ValueError):
        return
    subprocess.run(["iptables", "-w", "-P", "FORWARD", policy], capture_output=True)
    if rest and rest[0] in ("0", "1"):
        try:
            Path("/proc/sys/net/ipv4/ip_forward").write_text(rest[0])
        except OSError:
            pass
    path.unlink(missing_ok=True)


def remove_exec_root(path: Path) -> None:
    """An ended engine's exec root, with the network-namespace mounts a killed daemon leaves in it."""
    try:
        mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
    except OSError:
        mounts = []
    for mount in sorted((m for m in mounts if m == str(path) or m.startswith(f"{path}/")), reverse=True):
        subprocess.run(["umount", "-l", mount], capture_output=True)
    shutil.rmtree(path, ignore_errors=True)


def remove_kchaos_objects(client: Any, label: str = "kchaos.cluster") -> None:
    """Every container and network carrying kchaos' label, force-removed."""
    for container in client.containers.list(all=True, filters={"label": label}):
        try:
            container.remove(force=True)
        except Exception:
            pass
    for network in client.networks.list(filters={"label": label}):
        try:
            network.remove()
        except Exception:
            pass
