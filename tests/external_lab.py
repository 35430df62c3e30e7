"""Jepsen's shape on one machine, for the tests of faults on a cluster kchaos did not start: three
Kafka brokers, each in its own network namespace with its own address and its own ``sshd``, on a
bridge of their own. kchaos reaches them only as a user's campaign would (bootstrap servers, and
the ``ssh`` preset to each node's address); this module, not kchaos, starts them.

Everything the lab makes (namespaces, the bridge, veth pairs, sshd and broker processes, files) is
named with one tag and removed by :meth:`Lab.close`, which never raises, even after a failed
start. Traffic goes only to the lab's own addresses and loopback. Needs root, ``ip``, Debian's
``iptables`` and ``openssh-server`` (installed by :func:`ensure_packages`, as ``kchaos setup
--docker`` installs Docker's)."""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from kchaos.clusters.node_config import new_cluster_id
from kchaos.clusters.node_config import LOG4J2_XML, SMALL_MACHINE_DEFAULTS
from kchaos.runtime.artifacts import require_java, resolve_kafka
from kchaos.runtime.debian import apt_install, can_install
from kchaos.runtime.kafka_tools import run_tool

#: one file per live lab (its tag -> its root), so a lab whose test process was killed is removed
#: by the next one (pytest runs no finalizer on SIGTERM or SIGKILL)
REGISTRY = Path("/tmp/kchaos-labs")
PACKAGES = {"iptables": "iptables", "sshd": "openssh-server", "ssh": "openssh-client"}
SUBNET = "10.213.77"
KAFKA_PORT, CONTROLLER_PORT = 9092, 9093


def missing_tools() -> list[str]:
    return [t for t in ("ip", *PACKAGES) if not (shutil.which(t) or Path(f"/usr/sbin/{t}").exists())]


def ensure_packages() -> str | None:
    """Install what the lab needs (root, apt); returns why it cannot run, or None."""
    if os.geteuid() != 0:
        return "the lab needs root (network namespaces, iptables, sshd)"
    missing = missing_tools()
    if not missing:
        return None
    if not can_install():
        return f"missing {missing} and no apt-get"
    apt_install(sorted({PACKAGES[t] for t in missing if t in PACKAGES}))
    left = missing_tools()
    return f"could not install {left}" if left else None


@contextlib.contextmanager
def running_lab(root: Path, kafka_version: str, features: dict[str, int] | None = None) -> Iterator["Lab"]:
    """A started lab, removed afterwards whatever happened (the tests' fixtures). Skips the test
    without root; fails it when the packages cannot be installed (never a silent skip)."""
    import pytest

    if os.geteuid() != 0:
        pytest.skip("the lab needs root (network namespaces, iptables, sshd)")
    why = ensure_packages()
    if why is not None:
        pytest.fail(why)
    lab = Lab(root, kafka_version, features=features)
    try:
        lab.start()
        yield lab
    finally:
        lab.close()
        assert leftovers(lab) == [], "the lab left namespaces, links or processes behind"


def sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=120)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc


@dataclass
class LabNode:
    node_id: int
    netns: str
    address: str
    dir: Path

    @property
    def process(self) -> str:
        """What this broker's command line alone contains."""
        return str(self.dir / "server.properties")


class Lab:
    kind = "ssh"

    def __init__(self, root: Path, kafka_version: str, nodes: int = 3, features: dict[str, int] | None = None):
        self.root = root
        self.features = features or {}
        self.tag = f"kx{os.getpid() % 100000}"
        self.bridge = f"{self.tag}br"
        self.kafka_version = kafka_version
        self.cluster_id = new_cluster_id()
        self.nodes = [LabNode(i, f"{self.tag}n{i}", f"{SUBNET}.{10 + i}", root / f"node-{i}") for i in range(1, nodes + 1)]
        self.key = root / "id_ed25519"

    # -- what a campaign needs ------------------------------------------------------------
    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{n.address}:{KAFKA_PORT}" for n in self.nodes)

    @property
    def ssh_options(self) -> str:
        return (f"-i {self.key} -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes "
                "-o LogLevel=ERROR -o ConnectTimeout=5")

    def external(self, **extra: object) -> dict[str, object]:
        """``[cluster.external]`` for the ssh preset: the JVMs are plain processes started by a script
        (no systemd), so start and logs are the campaign's own node commands."""
        return {"bootstrap_servers": self.bootstrap_servers, "access": "ssh", "options": self.ssh_options,
                "cluster_id": self.cluster_id, "allow_faults": True,
                "nodes": [{"id": n.node_id, "host": n.address, "target": f"root@{n.address}", "process": n.process}
                          for n in self.nodes],
                "commands": {"start": f"node: sh {self.root}/node-{{node_id}}/start.sh",
                             "logs": f"node: tail -c 5000000 {self.root}/node-{{node_id}}/logs/server.log"},
                **extra}

    # -- bring up -------------------------------------------------------------------------
    def start(self) -> None:
        remove_stale_labs()
        self.root.mkdir(parents=True, exist_ok=True)
        REGISTRY.mkdir(exist_ok=True)
        (REGISTRY / self.tag).write_text(f"{os.getpid()} {self.root} {len(self.nodes)}\n")
        self._network()
        self._sshd()
        self._brokers()
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers, "log_level": 0})
        self.wait(lambda: len(admin.list_topics(timeout=5).brokers) == len(self.nodes), 120, "every broker registered")

    def _network(self) -> None:
        sh("ip", "link", "add", self.bridge, "type", "bridge")
        # bridged frames pass the host's FORWARD chain when br_netfilter is loaded, and a Docker
        # engine (kchaos' own included) leaves that chain's policy DROP: admit the lab's own traffic
        sh("iptables", "-w", "-I", "FORWARD", *self._forward_rule())
        sh("ip", "addr", "add", f"{SUBNET}.1/24", "dev", self.bridge)
        sh("ip", "link", "set", self.bridge, "up")
        for n in self.nodes:
            host_if = f"{self.tag}h{n.node_id}"
            sh("ip", "netns", "add", n.netns)
            sh("ip", "link", "add", host_if, "type", "veth", "peer", "name", "eth0", "netns", n.netns)
            sh("ip", "link", "set", host_if, "master", self.bridge, "up")
            sh("ip", "netns", "exec", n.netns, "ip", "addr", "add", f"{n.address}/24", "dev", "eth0")
            sh("ip", "netns", "exec", n.netns, "ip", "link", "set", "eth0", "up")
            sh("ip", "netns", "exec", n.netns, "ip", "link", "set", "lo", "up")

    def _sshd(self) -> None:
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.key))
        Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege separation directory
        for n in self.nodes:
            d = n.dir / "sshd"
            d.mkdir(parents=True, exist_ok=True)
            sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / "host_key"))
            shutil.copy(f"{self.key}.pub", d / "authorized_keys")
            (d / "sshd_config").write_text(
                f"ListenAddress {n.address}\nPort 22\nHostKey {d / 'host_key'}\nPidFile {d / 'sshd.pid'}\n"
                f"AuthorizedKeysFile {d / 'authorized_keys'}\nPermitRootLogin prohibit-password\nStrictModes no\n"
                "UsePAM no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nMaxSessions 50\n"
                "MaxStartups 50\n")
            sh("ip", "netns", "exec", n.netns, "/usr/sbin/sshd", "-f", str(d / "sshd_config"), "-E", str(d / "sshd.log"))
        for n in self.nodes:
            self.wait(lambda n=n: self.ssh(n, "true", check=False).returncode == 0, 30, f"sshd of node {n.node_id}")

    def ssh(self, node: LabNode, command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return sh("ssh", *shlex.split(self.ssh_options), f"root@{node.address}", command, check=check)

    def _brokers(self) -> None:
        jars = resolve_kafka(self.kafka_version)
        voters = ",".join(f"{n.node_id}@{n.address}:{CONTROLLER_PORT}" for n in self.nodes)
        (self.root / "log4j2.xml").write_text(LOG4J2_XML)
        for n in self.nodes:
            (n.dir / "logs").mkdir(parents=True, exist_ok=True)
            props = {**SMALL_MACHINE_DEFAULTS, "node.id": n.node_id, "process.roles": "broker,controller",
                     "listeners": f"PLAINTEXT://{n.address}:{KAFKA_PORT},CONTROLLER://{n.address}:{CONTROLLER_PORT}",
                     "advertised.listeners": f"PLAINTEXT://{n.address}:{KAFKA_PORT}",
                     "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                     "controller.listener.names": "CONTROLLER", "inter.broker.listener.name": "PLAINTEXT",
                     "controller.quorum.voters": voters, "log.dirs": n.dir / "data",
                     "offsets.topic.replication.factor": 3, "transaction.state.log.replication.factor": 3,
                     "transaction.state.log.min.isr": 2, "min.insync.replicas": 2,
                     "offsets.topic.num.partitions": 3, "transaction.state.log.num.partitions": 3,
                     "share.coordinator.state.topic.num.partitions": 3, "default.replication.factor": 3}
            n.dir.joinpath("server.properties").write_text("".join(f"{k}={v}\n" for k, v in props.items()))
            features = [a for name, level in self.features.items() for a in ("--feature", f"{name}={level}")]
            run_tool("storage", ["format", "-t", self.cluster_id, "-c", n.process, *features], self.kafka_version, jars,
                     log4j_config=self.root / "log4j2.xml", logs_dir=n.dir / "logs")
            java = [require_java(), "-Xms256m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                    f"-Dkafka.logs.dir={n.dir / 'logs'}", f"-Dlog4j2.configurationFile={self.root / 'log4j2.xml'}",
                    "-cp", jars.classpath, "kafka.Kafka", n.process]
            # idempotent, as a start command must be: a running broker is left alone
            (n.dir / "start.sh").write_text(
                f"pgrep -f {shlex.quote(grep_self_safe(n.process))} >/dev/null && exit 0\n"
                f"nohup setsid {shlex.join(java)} >> {n.dir / 'logs' / 'stdout.log'} 2>&1 < /dev/null &\n")
            self.ssh(n, f"sh {n.dir / 'start.sh'}")  # started through its own sshd: inside its namespace

    def wait(self, ok, timeout_s: float, what: str) -> None:
        wait_for(ok, timeout_s, what)

    # -- what the tests look at -----------------------------------------------------------
    def client_config(self) -> dict[str, str]:
        return {}

    def on_node(self, node: LabNode, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """``argv`` in the node's network namespace."""
        return sh("ip", "netns", "exec", node.netns, *argv, check=check)

    def broker_pids(self, node: LabNode) -> list[int]:
        proc = sh("pgrep", "-f", grep_self_safe(node.process), check=False)
        return [int(p) for p in proc.stdout.split()]

    def process_state(self, node: LabNode) -> str:
        """R/S/D... for a live broker, T when stopped (paused), '' when none runs."""
        pids = self.broker_pids(node)
        if not pids:
            return ""
        return Path(f"/proc/{pids[0]}/stat").read_text().rsplit(")", 1)[1].split()[0]

    def kchaos_rules(self, node: LabNode) -> list[str]:
        """Every iptables rule of the node's namespace that mentions KCHAOS (none: healed)."""
        return [line for line in self.all_rules(node) if "KCHAOS" in line]

    def all_rules(self, node: LabNode) -> list[str]:
        return self.on_node(node, "iptables", "-w", "-S").stdout.splitlines()

    # -- tear down ------------------------------------------------------------------------
    def close(self) -> None:
        for n in self.nodes:
            sh("pkill", "-KILL", "-f", grep_self_safe(n.process), check=False)
            pid_file = n.dir / "sshd" / "sshd.pid"
            if pid_file.exists():
                sh("kill", pid_file.read_text().strip(), check=False)
            sh("pkill", "-KILL", "-f", grep_self_safe(str(n.dir / "sshd" / "sshd_config")), check=False)
            sh("ip", "netns", "del", n.netns, check=False)
            sh("ip", "link", "del", f"{self.tag}h{n.node_id}", check=False)
        sh("ip", "link", "del", self.bridge, check=False)
        while sh("iptables", "-w", "-D", "FORWARD", *self._forward_rule(), check=False).returncode == 0:
            pass
        (REGISTRY / self.tag).unlink(missing_ok=True)

    def _forward_rule(self) -> list[str]:
        return ["-i", self.bridge, "-o", self.bridge, "-j", "ACCEPT"]


def wait_for(ok, timeout_s: float, what: str) -> None:
    """Until ``ok()`` is true; its exceptions (a broker not listening yet) count as not yet, and
    the last one is named when time runs out. A RuntimeError (the lab saw something fail) ends it."""
    deadline = time.monotonic() + timeout_s
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            if ok():
                return
        except RuntimeError:
            raise
        except Exception as exc:
            last = exc
        time.sleep(0.2)
    raise TimeoutError(f"{what} not ready after {timeout_s:.0f}s" + (f" (last: {last})" if last else ""))


def grep_self_safe(text: str) -> str:
    from kchaos.clusters.external.node_access import grep_pattern

    return grep_pattern(text)


def leftovers(lab: "Lab") -> list[str]:
    """What of a lab is still there (namespaces, links, processes): nothing after close()."""
    out = [ns for ns in sh("ip", "netns", "list", check=False).stdout.split() if ns.startswith(lab.tag)]
    out += [line for line in sh("ip", "-o", "link", check=False).stdout.splitlines() if f" {lab.tag}" in line]
    out += [line for line in sh("pgrep", "-af", grep_self_safe(str(lab.root)), check=False).stdout.splitlines()
            if int(line.split()[0]) != os.getpid()]
    out += [rule for rule in sh("iptables", "-w", "-S", "FORWARD", check=False).stdout.splitlines() if lab.bridge in rule]
    return out


def remove_stale_labs() -> list[str]:
    """Remove the labs whose test process is gone (killed before its finalizer ran)."""
    removed = []
    for entry in sorted(REGISTRY.glob("kx[0-9]*")) if REGISTRY.exists() else []:  # kxd*: tests/compose_lab.py
        try:
            pid, root, nodes = entry.read_text().split()
        except ValueError:
            entry.unlink(missing_ok=True)
            continue
        if Path(f"/proc/{pid}").exists():
            continue
        lab = Lab(Path(root), "unused", int(nodes))
        lab.tag, lab.bridge = entry.name, f"{entry.name}br"
        for n in lab.nodes:
            n.netns = f"{lab.tag}n{n.node_id}"
        lab.close()
        removed.append(entry.name)
    return removed
