"""Docker backend: Kafka containers on a user-defined bridge network.

Node faults map to container operations (kill, stop, pause/unpause, restart). Network faults:
a cut between nodes is a packet filter in the node's own network namespace (:class:`DockerNetwork`),
client-link toxics go through Toxiproxy on the host in front of each published client port, as
on the local backend. The engine is the user's, or kchaos' own ``dockerd``
(clusters/docker/engine.py); the image is ``apache/kafka`` or kchaos' own build from the cached
jars (clusters/docker/image.py). The container and network specs are plain data (:func:`container_specs`), unit-tested without an
engine; docs/clusters.md has the capability table.
"""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import psutil

from kchaos.clusters.base import Capability, Cluster, Node, NodeInfo, Role
from kchaos.clusters.compaction import merge_cleaner_checkpoints
from kchaos.clusters.docker.engine import INSTALL_HINT, PrivateDockerEngine, missing_binaries, remove_kchaos_objects
from kchaos.clusters.docker.image import ensure_kafka_image
from kchaos.clusters.node_config import SMALL_MACHINE_DEFAULTS, new_cluster_id
from kchaos.clusters.proxy.client import MessageProxyClient
from kchaos.clusters.proxy.links import LinkNetwork, ProxyNetwork, proxy_name_client
from kchaos.clusters.proxy.toxiproxy import Proxy, ToxiproxyClient, ensure_toxiproxy_binary, start_toxiproxy
from kchaos.clusters.spec import ClusterSpec
from kchaos.errors import ClusterError, ConfigError, SetupError
from kchaos.log import say
from kchaos.runtime.kafka_tools import upgrade_feature
from kchaos.runtime.ports import free_port
from kchaos.runtime.processes import ManagedProcess, PidFile
from kchaos.waiting import WaitTimeout, wait_until

INTERNAL_PORT = 19092
CONTROLLER_PORT = 19093
CLIENT_PORT = 9092
DATA_DIR = "/var/lib/kafka/data"  # log.dirs, set for both images (a volume in apache/kafka's)


@dataclass(frozen=True)
class ContainerSpec:
    name: str
    node_id: int
    image: str
    hostname: str
    environment: dict[str, str]
    host_port: int | None          # published CLIENT port on 127.0.0.1 (brokers)
    labels: dict[str, str] = field(default_factory=dict)

    def run_kwargs(self, network: str) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "image": self.image, "name": self.name, "hostname": self.hostname, "detach": True,
            "environment": dict(self.environment), "network": network, "labels": dict(self.labels),
        }
        if self.host_port is not None:
            kwargs["ports"] = {f"{CLIENT_PORT}/tcp": ("127.0.0.1", self.host_port)}
        return kwargs


def env_name(prop: str) -> str:
    """The variable apache/kafka (and kchaos' own image) maps to ``prop``: ``_`` -> ``__``,
    ``-`` -> ``___``, ``.`` -> ``_``, upper case."""
    return "KAFKA_" + prop.replace("_", "__").replace("-", "___").replace(".", "_").upper()


def container_specs(spec: ClusterSpec, prefix: str, host_ports: dict[int, int], cluster_id: str,
                    image: str | None = None, advertised_ports: dict[int, int] | None = None,
                    format_features: dict[str, int] | None = None) -> list[ContainerSpec]:
    """The containers of ``spec``: ``host_ports`` are the brokers' published client ports,
    ``advertised_ports`` what clients are told (the client proxies' ports; default the published
    ones), ``format_features`` the feature levels kchaos' image formats with."""
    image = image or spec.docker.image or f"apache/kafka:{spec.kafka_version}"
    advertised = advertised_ports or host_ports
    ctl = spec.dedicated_controllers
    controllers = list(range(1, ctl + 1)) if ctl else list(range(1, spec.nodes + 1))
    brokers = list(range(ctl + 1, ctl + spec.nodes + 1)) if ctl else list(controllers)
    voters = ",".join(f"{c}@{prefix}-n{c}:{CONTROLLER_PORT}" for c in controllers)
    rf, min_isr, parts = spec.replication_factor, spec.min_insync_replicas, spec.internal_topic_partitions
    out = []
    for nid in sorted(set(controllers) | set(brokers)):
        roles = [r for r, ids in (("broker", brokers), ("controller", controllers)) if nid in ids]
        host = f"{prefix}-n{nid}"
        props: dict[str, str] = {
            "node.id": str(nid),
            "process.roles": ",".join(roles),
            "controller.quorum.voters": voters,
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,INTERNAL:PLAINTEXT,CLIENT:PLAINTEXT",
        }
        listeners = []
        if nid in brokers:
            listeners += [f"INTERNAL://0.0.0.0:{INTERNAL_PORT}", f"CLIENT://0.0.0.0:{CLIENT_PORT}"]
            props["advertised.listeners"] = f"INTERNAL://{host}:{INTERNAL_PORT},CLIENT://127.0.0.1:{advertised[nid]}"
            props["inter.broker.listener.name"] = "INTERNAL"
        if nid in controllers:
            listeners.append(f"CONTROLLER://0.0.0.0:{CONTROLLER_PORT}")
        props["listeners"] = ",".join(listeners)
        props["log.dirs"] = DATA_DIR
        props.update(SMALL_MACHINE_DEFAULTS)
        props.update({
            "default.replication.factor": str(rf), "min.insync.replicas": str(min_isr),
            "offsets.topic.replication.factor": str(rf), "offsets.topic.num.partitions": str(parts),
            "transaction.state.log.replication.factor": str(rf), "transaction.state.log.min.isr": str(min_isr),
            "transaction.state.log.num.partitions": str(parts),
            "share.coordinator.state.topic.replication.factor": str(rf),
            "share.coordinator.state.topic.min.isr": str(min_isr),
            "share.coordinator.state.topic.num.partitions": str(parts),
        })
        props.update(spec.broker)
        env = {env_name(k): v for k, v in props.items()}
        env["CLUSTER_ID"] = cluster_id
        env["KAFKA_HEAP_OPTS"] = f"-Xms{spec.heap_mb // 2}m -Xmx{spec.heap_mb}m"
        env["KCHAOS_CONTAINER"] = host
        if format_features:
            env["KCHAOS_FORMAT_FEATURES"] = " ".join(f"{k}={v}" for k, v in sorted(format_features.items()))
        out.append(ContainerSpec(host, nid, image, host, env, host_ports.get(nid),
                                 {"kchaos.cluster": prefix, "kchaos.node": str(nid)}))
    return out


class DockerNode(Node):
    def __init__(self, cluster: "DockerCluster", spec: ContainerSpec, roles: frozenset[Role]):
        self.cluster = cluster
        self.spec = spec
        self.node_id = spec.node_id
        self.roles = roles
        self.logs_dir = cluster.work_dir / f"node-{spec.node_id}" / "logs"
        #: set when the node was upgraded to another release than the cluster's (rolling upgrade)
        self.version: str | None = None

    def _container(self) -> Any:
        return self.cluster.client.containers.get(self.spec.name)

    def _status(self) -> str:
        try:
            return self._container().status
        except Exception:
            return "missing"

    def kill(self) -> None:
        self._container().kill()

    def terminate(self) -> None:
        self._container().stop(timeout=60)

    def pause(self) -> None:
        self._container().pause()

    def resume(self) -> None:
        self._container().unpause()

    def restart(self) -> None:
        self._container().restart(timeout=60)
        self.cluster.record_pids(self)

    def start(self) -> None:
        self._container().start()
        self.cluster.record_pids(self)

    @property
    def is_running(self) -> bool:
        return self._status() in ("running", "paused")

    @property
    def is_paused(self) -> bool:
        return self._status() == "paused"

    @property
    def log_paths(self) -> list[Path]:
        """The container's output, copied here when the cluster stops."""
        return sorted(self.logs_dir.glob("*.log")) if self.logs_dir.exists() else []

    def save_logs(self) -> None:
        try:
            text = self._container().logs(stdout=True, stderr=True)
        except Exception:
            return
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        (self.logs_dir / "stdout.log").write_bytes(text)

    def keep_logs(self) -> Path | None:
        """The container's output so far, kept apart before it is replaced (a rolling upgrade):
        ``stdout.<n>.log``, numbered in the order the containers ran, before ``stdout.log`` (the
        running one's) when the log readers sort them."""
        self.save_logs()
        current = self.logs_dir / "stdout.log"
        if not current.exists():
            return None
        kept = self.logs_dir / f"stdout.{len(list(self.logs_dir.glob('stdout.[0-9]*.log')))}.log"
        current.rename(kept)
        return kept

    def read_file(self, path: str) -> str | None:
        """A file of the container's file system (running or not), or None where it has none."""
        import docker

        try:
            stream, _ = self._container().get_archive(path)
        except docker.errors.NotFound:
            return None
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
            member = tar.next()
            extracted = tar.extractfile(member) if member is not None else None
            return extracted.read().decode(errors="replace") if extracted is not None else None

    def pid_in_host(self) -> int | None:
        try:
            pid = int(self._container().attrs["State"]["Pid"])
        except Exception:
            return None
        return pid or None

    def address(self) -> str | None:
        """The container's address on the cluster's network."""
        try:
            networks = self._container().attrs["NetworkSettings"]["Networks"]
            return networks[self.cluster.network_name]["IPAddress"] or None
        except Exception:
            return None

    def info(self) -> NodeInfo:
        status = self._status()
        state = {"running": "running", "paused": "paused"}.get(status, "stopped")
        addr = f"127.0.0.1:{self.spec.host_port}" if self.spec.host_port else None
        proxy = self.cluster.client_proxy_address(self.node_id)
        return NodeInfo(self.node_id, tuple(sorted(r.value for r in self.roles)), self.pid_in_host(), state, addr,
                        proxy, str(self.logs_dir))


def cluster_prefix(work_dir: Path) -> str:
    """Names of a cluster's containers and network: unique per work directory (a run's is always
    ``<run>/cluster``, so its name alone would repeat)."""
    return "kchaos-" + hashlib.sha1(str(Path(work_dir).resolve()).encode()).hexdigest()[:10]


def relocated_archive(archive: bytes, path: str) -> bytes:
    """A tar of ``path`` as ``get_archive`` returns it (its members named from the directory's own
    name) renamed to ``path`` from the root, for ``put_archive("/", ...)`` into a container where
    the directory's parents may not exist yet."""
    parent = path.rstrip("/").rsplit("/", 1)[0].lstrip("/")
    out = io.BytesIO()
    with tarfile.open(fileobj=io.BytesIO(archive)) as src, tarfile.open(fileobj=out, mode="w") as dst:
        for member in src.getmembers():
            body = src.extractfile(member) if member.isfile() else None
            member.name = f"{parent}/{member.name}"
            dst.addfile(member, body)
    return out.getvalue()


class DockerNetwork(ProxyNetwork):
    """Links of a Docker cluster. Between nodes: packet filters in the nodes' own network
    namespaces (``nsenter`` + ``iptables``, a ``KCHAOS`` chain per node), cutting one TCP link
    (replication or quorum, one direction of connection) as the local backend's pair proxies do.
    Client links: Toxiproxy on the host in front of each broker's published port (``client``).
    Every change is undone by :meth:`heal`. A node restarted during a cut comes back with a new
    network namespace, so uncut: a cut lasts while its node runs."""

    CHAIN = "KCHAOS"

    def _iptables(self, node: DockerNode, *args: str, check: bool = True) -> bool:
        pid = node.pid_in_host()
        if pid is None:
            if check:
                raise ClusterError(f"node {node.node_id} is not running; its links cannot be changed")
            return False
        proc = subprocess.run(["nsenter", "-t", str(pid), "-n", "iptables", "-w", *args], capture_output=True, text=True)
        if check and proc.returncode != 0:
            raise ClusterError(f"iptables in node {node.node_id}'s namespace failed: {proc.stderr.strip()}")
        return proc.returncode == 0

    def _chain(self, node: DockerNode) -> None:
        if not self._iptables(node, "-n", "-L", self.CHAIN, check=False):
            self._iptables(node, "-N", self.CHAIN)
        for hook in ("INPUT", "OUTPUT"):
            if not self._iptables(node, "-C", hook, "-j", self.CHAIN, check=False):
                self._iptables(node, "-I", hook, "-j", self.CHAIN)

    #: every replication and quorum link by name, not the pair proxies' (there are none between nodes)
    links_between = LinkNetwork.links_between

    def cut(self, names: list[str]) -> list[str]:
        for name in names:
            kind, src_s, _, dst_s = name.split("-")
            src = self.cluster.node(int(src_s[1:]))
            dst = self.cluster.node(int(dst_s[1:]))
            port = str(INTERNAL_PORT if kind == "repl" else CONTROLLER_PORT)
            peer = dst.address()  # type: ignore[attr-defined]
            if peer is None:
                raise ClusterError(f"node {dst.node_id} has no address on the network; link {name} cannot be cut")
            self._chain(src)  # type: ignore[arg-type]
            self._iptables(src, "-A", self.CHAIN, "-p", "tcp", "-d", peer, "--dport", port, "-j", "DROP")  # type: ignore[arg-type]
            self._iptables(src, "-A", self.CHAIN, "-p", "tcp", "-s", peer, "--sport", port, "-j", "DROP")  # type: ignore[arg-type]
        return names

    def heal(self) -> None:
        for node in self.cluster.nodes:
            self._iptables(node, "-F", self.CHAIN, check=False)  # type: ignore[arg-type]
        self.client.reset()


class DockerCluster(Cluster):
    """Kafka in containers on one bridge network, on the engine the spec names (``engine``:
    ``auto`` uses ``docker_host``, ``DOCKER_HOST`` or the default socket when one answers, else a
    private ``dockerd``)."""

    backend_name = "docker"

    @classmethod
    def capabilities_for(cls, spec: ClusterSpec) -> frozenset[Capability]:
        caps = {Capability.KILL, Capability.TERMINATE, Capability.PAUSE, Capability.RESTART, Capability.UPGRADE}
        if spec.proxy_clients:  # Toxiproxy on the client links; the cuts between nodes heal with it
            caps |= {Capability.NETWORK, Capability.PARTITION}
            if spec.proxy_messages:  # the message proxy behind them (the spec refuses it without them)
                caps.add(Capability.MESSAGES)
        return frozenset(caps)

    @property
    def capabilities(self) -> frozenset[Capability]:  # type: ignore[override]
        return self.capabilities_for(self.spec)

    def __init__(self, spec: ClusterSpec, work_dir: Path):
        super().__init__()
        if spec.backend != "docker":
            raise ConfigError(f"DockerCluster needs backend = 'docker', not {spec.backend!r}")
        self.spec = spec
        self.work_dir = Path(work_dir)
        self.pid_dir = self.work_dir / "pids"
        self.kafka_version = spec.kafka_version
        self.prefix = cluster_prefix(self.work_dir)
        self.network_name = f"{spec.docker.network}-{self.prefix}"
        self.image: str | None = None
        self.toxiproxy: ToxiproxyClient | None = None
        self._toxiproxy_process: ManagedProcess | None = None
        self._proxy_ports: dict[int, int] = {}
        #: the message proxy (spec.proxy_messages): its control client, process and listener per broker
        self.messages: MessageProxyClient | None = None
        self._message_process: ManagedProcess | None = None
        self._message_ports: dict[int, int] = {}
        self._engine: PrivateDockerEngine | None = None
        self._client: Any = None
        self._nodes: list[DockerNode] = []

    # -- the engine ------------------------------------------------------------------------
    def _external_host(self) -> str | None:
        """The engine to use when it is not kchaos' own: the spec's, DOCKER_HOST, or the default socket."""
        if self.spec.docker.docker_host:
            return self.spec.docker.docker_host
        if os.environ.get("DOCKER_HOST"):
            return os.environ["DOCKER_HOST"]
        if self.spec.docker.engine == "external" or Path("/var/run/docker.sock").exists():
            return "unix:///var/run/docker.sock"
        return None

    @classmethod
    def preflight(cls, spec: ClusterSpec) -> None:
        """Before anything starts: an engine to use, or the binaries for kchaos' own."""
        try:
            import docker  # noqa: F401
        except ImportError:
            raise SetupError("the docker backend needs the docker SDK", "pip install 'kchaos[docker]'") from None
        probe = cls(spec, Path("/nonexistent"))
        if spec.docker.engine != "private" and probe._external_host() is not None:
            return  # the user's engine: whether it answers is known at start
        missing = missing_binaries()
        if missing:
            raise SetupError(f"no Docker engine here: {', '.join(missing)} not installed and no DOCKER_HOST",
                             INSTALL_HINT)
        if os.geteuid() != 0:
            raise SetupError("kchaos' own Docker engine runs as root", "run as root, or point DOCKER_HOST at an engine")

    @property
    def client(self) -> Any:
        if self._client is None:
            try:
                import docker
            except ImportError:
                raise SetupError("the docker backend needs the docker SDK", "pip install 'kchaos[docker]'") from None
            host = None if self.spec.docker.engine == "private" else self._external_host()
            if host is None:
                self._engine = PrivateDockerEngine(self.work_dir, self.pid_dir)
                self._client = self._engine.start()
                return self._client
            try:
                self._client = docker.DockerClient(base_url=host)
                self._client.ping()
            except Exception as exc:
                self._client = None
                raise ClusterError(f"no Docker engine answered at {host} ({exc.__class__.__name__})",
                                   "start Docker, set DOCKER_HOST, leave cluster.docker.engine = 'auto' without "
                                   "DOCKER_HOST for kchaos' own engine, or use cluster.backend = 'local'") from None
        return self._client

    @property
    def private_engine(self) -> bool:
        return self._engine is not None

    # -- topology --------------------------------------------------------------------------
    @property
    def nodes(self) -> list[Node]:  # type: ignore[override]
        return list(self._nodes)

    @property
    def bootstrap_servers(self) -> str:
        ports = {n.node_id: self._proxy_ports.get(n.node_id, n.spec.host_port) for n in self._nodes if n.is_broker}
        return ",".join(f"127.0.0.1:{p}" for p in ports.values())

    def client_proxy_address(self, node_id: int) -> str | None:
        port = self._proxy_ports.get(node_id)
        return f"127.0.0.1:{port}" if port else None

    @property
    def network(self) -> DockerNetwork:
        self.require(Capability.NETWORK)
        return DockerNetwork(self)

    def info(self) -> dict[str, Any]:
        return {**super().info(), "image": self.image, "engine": "private dockerd" if self.private_engine else "external"}

    def cleaned_offsets(self) -> dict[str, Any] | None:
        """What the log cleaner compacted, from each container's ``cleaner-offset-checkpoint`` (as
        the local backend reads its data directories); None when a container cannot be read."""
        texts = []
        for node in self._nodes:
            try:
                text = node.read_file(f"{DATA_DIR}/cleaner-offset-checkpoint")
            except Exception:
                return None
            if text is not None:
                texts.append(text)
        return merge_cleaner_checkpoints(texts) if self._nodes else None

    def _image(self, version: str | None = None) -> str:
        """The spec's image; by default ``apache/kafka`` on an engine that has it, else kchaos' own
        build; of ``version`` (a rolling upgrade's release) where given, the spec's release if not."""
        version = version or self.spec.kafka_version
        if self.spec.docker.image and not self.spec.docker.image.startswith("kchaos/kafka"):
            if version != self.spec.kafka_version:
                raise ConfigError(f"cluster.docker.image = {self.spec.docker.image!r} is one release: a rolling "
                                  f"upgrade to {version} needs kchaos' image or apache/kafka",
                                  "leave cluster.docker.image unset")
            return self.spec.docker.image
        official = f"apache/kafka:{version}"
        if not self.spec.docker.image and not self.private_engine:
            for fetch in (lambda: self.client.images.get(official),
                          lambda: self.client.images.pull("apache/kafka", tag=version)):
                try:
                    fetch()
                    return official
                except Exception:
                    continue  # not here, no registry: kchaos' own build below
        return ensure_kafka_image(self.client, version, say=say)

    def plan(self, image: str | None = None) -> list[ContainerSpec]:
        ctl = self.spec.dedicated_controllers
        brokers = range(ctl + 1, ctl + self.spec.nodes + 1) if ctl else range(1, self.spec.nodes + 1)
        published = {b: free_port() for b in brokers}
        self._proxy_ports = {b: free_port() for b in brokers} if self.spec.proxy_clients else {}
        features: dict[str, int] = {}
        if image and image.startswith("kchaos/kafka"):
            if self.spec.transaction_version is not None:
                features["transaction.version"] = self.spec.transaction_version
            if self.spec.share_version is not None:
                features["share.version"] = self.spec.share_version
            if self.spec.streams_version is not None:
                features["streams.version"] = self.spec.streams_version
        return container_specs(self.spec, self.prefix, published, new_cluster_id(), image=image,
                               advertised_ports=self._proxy_ports or None, format_features=features)

    # -- rolling binary upgrade -----------------------------------------------------------
    def node_versions(self) -> dict[int, str]:
        return {n.node_id: n.version or self.kafka_version for n in self._nodes}

    def upgrade_node(self, node_id: int, version: str, timeout_s: float = 120.0) -> dict[str, Any]:
        """Stop ``node_id``'s container gracefully and start a new one of the same name, hostname,
        network, published port and environment on ``version``'s image, with the old one's data
        directory copied across while both are stopped (kchaos' image keeps it in the container's
        own layer): one step of a rolling upgrade, as the local backend's restart on other jars.
        The storage is not formatted again (its ``meta.properties`` is there). The old container is
        kept, renamed, until the new one started, so a failed start loses nothing."""
        node = self.node(node_id)
        assert isinstance(node, DockerNode)
        image = self._image(version)  # found or built before the node stops
        before = node.version or self.kafka_version
        old = node._container()
        started = time.monotonic()
        old.stop(timeout=60)
        node.keep_logs()
        stream, _ = old.get_archive(DATA_DIR)
        data = relocated_archive(b"".join(stream), DATA_DIR)
        old.rename(f"{node.spec.name}-{before}")
        spec = replace(node.spec, image=image)
        kwargs = spec.run_kwargs(self.network_name)
        kwargs.pop("detach")
        new = self.client.containers.create(**kwargs)
        if not new.put_archive("/", data):
            raise ClusterError(f"node {node_id}'s data could not be copied into its {version} container",
                               f"the old container is kept as {node.spec.name}-{before}")
        node.spec, node.version = spec, version
        new.start()
        self.record_pids(node)

        def up() -> bool:
            if node._status() not in ("running", "created"):
                node.save_logs()
                raise ClusterError(f"node {node_id} exited when started on Kafka {version}", "read its log",
                                   detail="".join(self._tail(node)))
            return b"Kafka Server started" in new.logs()

        wait_until(up, timeout_s, 0.5, f"node {node_id} did not start on Kafka {version} within {timeout_s:.0f}s",
                   give_up_on=(ClusterError,))
        old.remove(v=True)
        return {"node": node_id, "from": before, "to": version, "restart_s": round(time.monotonic() - started, 1),
                "image": image}

    def finish_upgrade(self, version: str) -> None:
        """Every node runs ``version``: it becomes the cluster's version (its tools too)."""
        if any(v != version for v in self.node_versions().values()):
            raise ClusterError(f"not every node runs {version}: {self.node_versions()}")
        self.kafka_version = version
        self.image = next((n.spec.image for n in self._nodes), self.image)
        for node in self._nodes:
            node.version = None

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        self.stop()
        try:
            self._start()
        except WaitTimeout as exc:
            self.stop()
            raise ClusterError(f"docker cluster not ready: {exc}",
                               f"read the containers' logs under {self.work_dir}") from None
        except BaseException:
            self.stop()
            raise

    def _start(self) -> None:
        client = self.client
        self.image = self._image()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        client.networks.create(self.network_name, driver="bridge", labels={"kchaos.cluster": self.prefix})
        specs = self.plan(self.image)
        self._start_message_proxy(specs)
        self._start_toxiproxy(specs)
        self._nodes = []
        for cs in specs:
            roles = frozenset(Role(r) for r in cs.environment["KAFKA_PROCESS_ROLES"].split(","))
            client.containers.run(**cs.run_kwargs(self.network_name))
            node = DockerNode(self, cs, roles)
            self._nodes.append(node)
            self.record_pids(node)
        expected = {n.node_id for n in self._nodes if n.is_broker}

        def registered() -> bool:
            for node in self._nodes:
                if node._status() not in ("running", "created"):
                    node.save_logs()
                    raise ClusterError(f"container of node {node.node_id} exited during start-up",
                                       "read its log", detail="".join(self._tail(node)))
            return expected <= set(self.admin().list_topics(timeout=5).brokers)

        wait_until(registered, self.spec.ready_timeout_s, 1.0, "brokers did not register", retry_on=(Exception,),
                   give_up_on=(ClusterError,))
        if self.spec.transaction_version is not None and not self.image.startswith("kchaos/kafka"):
            # the official image formats with the release's defaults: change the level after start
            upgrade_feature(self, "transaction.version", self.spec.transaction_version,
                            downgrade=self.spec.transaction_version < 2)
        self.wait_healthy(self.spec.ready_timeout_s)

    @staticmethod
    def _tail(node: DockerNode, lines: int = 25) -> list[str]:
        path = node.logs_dir / "stdout.log"
        try:
            return path.read_text(errors="replace").splitlines(keepends=True)[-lines:]
        except OSError:
            return []

    def _start_message_proxy(self, specs: list[ContainerSpec]) -> None:
        """Kafka-protocol message faults (certify-tv-flip's late and duplicated EndTxn): the message
        proxy between each broker's Toxiproxy client proxy and its published port, client ->
        ``client-n<i>`` -> the proxy's listener for broker i -> the container, as on the local
        backend's client path. Not between brokers: those links are on the containers' network."""
        if not self.spec.proxy_messages:
            return
        directory = self.work_dir / "messages"
        directory.mkdir(parents=True, exist_ok=True)
        control = free_port()
        self._message_ports = {cs.node_id: free_port() for cs in specs if cs.host_port is not None}
        argv = [sys.executable, "-m", "kchaos.clusters.proxy", "--control", str(control),
                "--events", str(directory / "events.jsonl")]
        for cs in specs:
            if cs.host_port is not None:
                argv += ["--route", f"{cs.node_id}={self._message_ports[cs.node_id]}:{cs.host_port}"]
        self._message_process = ManagedProcess("message-proxy", argv, directory / "message-proxy.log", self.pid_dir,
                                               marker=str(self.work_dir))
        self._message_process.start()
        self.messages = MessageProxyClient(control)
        try:
            wait_until(self.messages.version, 20, 0.1, "the message proxy did not answer", retry_on=(ClusterError,))
        except WaitTimeout as exc:
            log = directory / "message-proxy.log"
            raise ClusterError(str(exc), detail=log.read_text(errors="replace")[-3000:] if log.exists() else None) from None

    def _start_toxiproxy(self, specs: list[ContainerSpec]) -> None:
        if not self.spec.proxy_clients:
            return
        self._toxiproxy_process, self.toxiproxy = start_toxiproxy(
            ensure_toxiproxy_binary(), free_port(), self.work_dir, self.pid_dir,
            [Proxy(proxy_name_client(cs.node_id), f"127.0.0.1:{self._proxy_ports[cs.node_id]}",
                   f"127.0.0.1:{self._message_ports.get(cs.node_id, cs.host_port)}")
             for cs in specs if cs.host_port is not None])

    def record_pids(self, node: DockerNode) -> None:
        """Pid files for a container's processes on the host (its JVM, its containerd shim), so a
        crashed harness's reaper ends them as it ends a local broker."""
        pid = node.pid_in_host()
        if pid is None:
            return
        self.pid_dir.mkdir(parents=True, exist_ok=True)
        try:
            shim = psutil.Process(pid).ppid()
            container_id = node._container().id
            PidFile(self.pid_dir / f"container-{node.node_id}.pid", pid, os.getpgid(pid),
                    f"kchaos.container={node.spec.hostname}", os.getpid()).write()
            PidFile(self.pid_dir / f"container-{node.node_id}-shim.pid", shim, os.getpgid(shim), container_id,
                    os.getpid()).write()
        except (psutil.Error, ProcessLookupError):
            pass

    def stop(self) -> None:
        self._close_admin()
        if self._message_process is not None:  # a process of this machine's, whatever the engine does
            self._message_process.terminate(5)
            self._message_process = None
            self.messages = None
            self._message_ports = {}
        if self._client is None and self._engine is None and self.spec.docker.engine != "private":
            host = self._external_host()
            if host is None:
                return  # no engine of ours was started: nothing of ours can be running
            try:
                self.client
            except (ClusterError, SetupError):
                return  # no SDK or no engine: nothing of ours can be running
        if self._client is not None:
            for node in self._nodes:
                node.save_logs()
            remove_kchaos_objects(self._client, f"kchaos.cluster={self.prefix}")
        if self._toxiproxy_process is not None:
            self._toxiproxy_process.terminate(5)
            self._toxiproxy_process = None
            self.toxiproxy = None
        if self._engine is not None:
            self._engine.stop(self._client)
            self._engine = None
            self._client = None
        for pid_file in self.pid_dir.glob("container-*.pid") if self.pid_dir.exists() else []:
            pid_file.unlink(missing_ok=True)  # their processes ended with their containers
        self._nodes = []
