"""The cluster contract every backend implements.

A :class:`Cluster` owns its nodes (ducktape's service model): ``start()`` first stops and cleans
whatever it had, then starts; ``stop()`` is idempotent and never raises for nodes already gone.
Optional abilities are explicit :class:`Capability` values; asking a backend for one it lacks
raises :class:`~harness.errors.CapabilityError` naming the backend and the capability.

Role look-ups (transaction/group/share coordinator, partition leader, active controller) are
answered from the brokers' own metadata at the moment of the call, so a fault that resolves
its target just before injection hits the node that holds the role *now*.
"""

from __future__ import annotations

import abc
import base64
import enum
import struct
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from kchaos.clusters.client_security import java_client_properties, properties_text, resolve_env_refs
from kchaos.errors import CapabilityError, ClusterError
from kchaos.log import client_log, say
from kchaos.runtime.kafka_tools import describe_quorum_leader, upgrade_feature
from kchaos.runtime.processes import is_alive
from kchaos.waiting import WaitTimeout, gone_within, wait_until

HEAL_PROGRESS_S = 15.0  # a progress line this often while a cluster is not healthy yet


class Capability(str, enum.Enum):
    KILL = "kill"            # SIGKILL a node
    TERMINATE = "terminate"  # graceful stop
    PAUSE = "pause"          # SIGSTOP / SIGCONT
    RESTART = "restart"
    NETWORK = "network"      # client-link faults through proxies (toxics, a link down)
    PARTITION = "partition"  # inter-node links cut (pair proxies, or packet filters on the nodes)
    LOGS = "logs"            # node log files on this machine
    UPGRADE = "upgrade"      # restart a node on another Kafka release (rolling binary upgrade)
    MESSAGES = "messages"    # delay, hold, duplicate or answer single Kafka requests (message proxy)
    MESSAGES_BETWEEN_BROKERS = "messages-between-brokers"  # the same on the links between brokers
    CLOCK = "clock"          # move a node's wall clock (libfaketime in its JVM; kchaos/runtime/faketime.py)
    DISK = "disk"            # fill a node's log directory (a small filesystem of its own; kchaos/runtime/small_disk.py)


class Role(str, enum.Enum):
    BROKER = "broker"
    CONTROLLER = "controller"


@dataclass(frozen=True)
class NodeInfo:
    """A node as ``cluster status --json`` shows it."""

    node_id: int
    roles: tuple[str, ...]
    pid: int | None
    state: str  # running | paused | stopped | unknown
    client_address: str | None
    proxy_address: str | None
    log_dir: str | None


class Node(abc.ABC):
    """One Kafka process (or container). Lifecycle methods raise CapabilityError when unsupported."""

    node_id: int
    roles: frozenset[Role]

    @property
    def is_broker(self) -> bool:
        return Role.BROKER in self.roles

    @property
    def is_controller(self) -> bool:
        return Role.CONTROLLER in self.roles

    def kill(self) -> None:
        raise CapabilityError(f"node {self.node_id} cannot be killed by this backend")

    def terminate(self) -> None:
        raise CapabilityError(f"node {self.node_id} cannot be stopped by this backend")

    def pause(self) -> None:
        raise CapabilityError(f"node {self.node_id} cannot be paused by this backend")

    def resume(self) -> None:
        raise CapabilityError(f"node {self.node_id} cannot be resumed by this backend")

    def restart(self) -> None:
        raise CapabilityError(f"node {self.node_id} cannot be restarted by this backend")

    def start(self) -> None:
        raise CapabilityError(f"node {self.node_id} cannot be started by this backend")

    def fill_disk(self, leave_mb: float) -> dict[str, int]:
        """Take all the free space of the node's log directory but ``leave_mb``."""
        raise CapabilityError(f"node {self.node_id}'s disk cannot be filled by this backend")

    def free_disk(self) -> int:
        """Give back what :meth:`fill_disk` took; the bytes freed."""
        raise CapabilityError(f"node {self.node_id}'s disk cannot be filled by this backend")

    def set_clock_offset(self, offset_s: float) -> None:
        """Move the node's wall clock ``offset_s`` seconds from the true time (0: back to it)."""
        raise CapabilityError(f"node {self.node_id}'s clock cannot be moved by this backend")

    @property
    def log_paths(self) -> list[Path]:
        return []

    @abc.abstractmethod
    def info(self) -> NodeInfo: ...


class _NotYetKnown(Exception):
    """A broker answered that it does not know a topic yet."""


class Cluster(abc.ABC):
    """A Kafka cluster under test."""

    backend_name: str = "abstract"
    capabilities: frozenset[Capability] = frozenset()

    def __init__(self) -> None:
        self._admin: Any = None
        self._java_config_file: Path | None = None

    # -- lifecycle -------------------------------------------------------------------------
    @abc.abstractmethod
    def start(self) -> None: ...

    @abc.abstractmethod
    def stop(self) -> None: ...

    def __enter__(self) -> "Cluster":
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- topology --------------------------------------------------------------------------
    @property
    @abc.abstractmethod
    def nodes(self) -> list[Node]: ...

    @property
    @abc.abstractmethod
    def bootstrap_servers(self) -> str: ...

    def client_security(self) -> dict[str, str]:
        """The clients' security settings as the campaign wrote them: librdkafka's dialect, secrets
        as ``${ENV:NAME}`` references (clusters/client_security.py). This, never the resolved
        settings, is what goes to files and to other processes, which resolve it themselves."""
        return {}

    def client_config(self) -> dict[str, str]:
        """Settings every client of this cluster needs (bootstrap, security), secrets resolved: for
        clients made in this process only."""
        return {**resolve_env_refs(self.client_security()), "bootstrap.servers": self.bootstrap_servers}

    def client_config_refs(self) -> dict[str, str]:
        """:meth:`client_config` with its secrets still references: for files and other processes."""
        return {**self.client_security(), "bootstrap.servers": self.bootstrap_servers}

    def java_client_config(self) -> dict[str, str]:
        """The security settings in the Java clients' dialect (Kafka's tools, Spark's Kafka source)."""
        return java_client_properties(self.client_security())

    def java_client_config_file(self) -> Path | None:
        """A ``--command-config`` file for Kafka's tools on a secured cluster (references only, no
        secret; None when the cluster needs no settings)."""
        props = self.java_client_config()
        if not props:
            return None
        if self._java_config_file is None:
            directory = getattr(self, "work_dir", None)
            if directory is None:
                import atexit
                import shutil
                import tempfile

                directory = Path(tempfile.mkdtemp(prefix="kchaos-client-"))
                atexit.register(shutil.rmtree, directory, True)
            Path(directory).mkdir(parents=True, exist_ok=True)
            self._java_config_file = Path(directory) / "client.properties"
            self._java_config_file.write_text(properties_text(props))
        return self._java_config_file

    def node(self, node_id: int) -> Node:
        for node in self.nodes:
            if node.node_id == node_id:
                return node
        raise ClusterError(f"no node {node_id}; nodes are {[n.node_id for n in self.nodes]}")

    @property
    def brokers(self) -> list[Node]:
        return [n for n in self.nodes if n.is_broker]

    @property
    def controllers(self) -> list[Node]:
        return [n for n in self.nodes if n.is_controller]

    @classmethod
    def capability_gap(cls, spec: Any, capability: Capability) -> str | None:
        """Why a cluster of ``spec`` lacks ``capability``, where the backend can say more than its name."""
        return None

    def has(self, capability: Capability) -> bool:
        return capability in self.capabilities

    def require(self, capability: Capability, what: str = "") -> None:
        if capability not in self.capabilities:
            have = ", ".join(sorted(c.value for c in self.capabilities)) or "none"
            raise CapabilityError(
                f"the {self.backend_name} backend cannot {capability.value}{' for ' + what if what else ''} "
                f"(its capabilities: {have})",
                "use the local or docker backend for node and network faults",
            )

    def info(self) -> dict[str, Any]:
        return {
            "backend": self.backend_name,
            "bootstrap_servers": self.bootstrap_servers,
            "capabilities": sorted(c.value for c in self.capabilities),
            "nodes": [n.info().__dict__ for n in self.nodes],
        }

    def cleaned_offsets(self) -> dict[str, Any] | None:
        """How far the log cleaner compacted each internal topic's partitions (``{topic: {partition:
        offset}}``; none: nothing cleaned), or None when this backend cannot see its brokers' logs.
        A commit the cleaner removed would otherwise look lost to the verifier."""
        return None

    # -- feature levels --------------------------------------------------------------------
    def change_feature(self, feature: str, level: int, current: int | None) -> None:
        """Set ``feature``'s finalised level (a ``[[steps]]`` flip): FeatureCommand's upgrade, or its
        downgrade when ``current`` (the level before, None where unknown) is higher, run here with
        this machine's tools against :attr:`bootstrap_servers`. A cluster kchaos did not start
        journals the change and its undo before it acts (clusters/external)."""
        upgrade_feature(self, feature, level, downgrade=current is not None and 0 <= level < current)

    # -- role look-ups ---------------------------------------------------------------------
    def admin(self) -> Any:
        """A cached confluent-kafka AdminClient for this cluster."""
        if self._admin is None:
            from confluent_kafka.admin import AdminClient

            conf = client_log({"log_level": 3, **self.client_config()})
            conf.setdefault("socket.timeout.ms", "10000")
            self._admin = AdminClient(conf)
        return self._admin

    def _close_admin(self) -> None:
        self._admin = None

    def partition_metadata(self, topic: str, timeout_s: float = 10.0) -> dict[int, Any]:
        """Partition metadata of ``topic``. Brokers apply new metadata at slightly different
        moments, so "unknown topic" is retried for a few seconds before it is believed."""

        seen: dict[str, Any] = {"error": "missing"}

        def known() -> dict[int, Any] | None:
            tmd = self.admin().list_topics(topic=topic, timeout=timeout_s).topics.get(topic)
            if tmd is not None and tmd.error is None:
                return dict(tmd.partitions)
            seen["error"] = tmd.error if tmd else "missing"
            return None

        try:
            return wait_until(known, timeout_s, 0.25)
        except WaitTimeout:
            raise ClusterError(f"topic {topic} is not known to the cluster ({seen['error']})") from None

    def leader(self, topic: str, partition: int) -> int:
        """Current leader node id of ``topic``-``partition`` (-1 when it has none)."""
        pmd = self.partition_metadata(topic).get(partition)
        if pmd is None:
            raise ClusterError(f"{topic} has no partition {partition}")
        return int(pmd.leader)

    def isr(self, topic: str, partition: int) -> list[int]:
        pmd = self.partition_metadata(topic)[partition]
        return sorted(int(r) for r in pmd.isrs)

    def replicas(self, topic: str, partition: int) -> list[int]:
        return [int(r) for r in self.partition_metadata(topic)[partition].replicas]

    def under_replicated_partitions(self) -> list[tuple[str, int]]:
        md = self.admin().list_topics(timeout=10)
        out = []
        for name, tmd in md.topics.items():
            for p, pmd in tmd.partitions.items():
                if len(pmd.isrs) < len(pmd.replicas):
                    out.append((name, p))
        return sorted(out)

    def _coordinator_by_key(self, internal_topic: str, key: str) -> int:
        parts = self.partition_metadata(internal_topic)
        partition = coordinator_partition(key, len(parts))
        return int(parts[partition].leader)

    def group_offsets_partition(self, group_id: str) -> int:
        """The ``__consumer_offsets`` partition that holds consumer group ``group_id``'s offsets."""
        return coordinator_partition(group_id, len(self.partition_metadata("__consumer_offsets")))

    def transaction_coordinator(self, transactional_id: str) -> int:
        """The broker coordinating ``transactional_id`` (leader of its __transaction_state partition)."""
        return self._coordinator_by_key("__transaction_state", transactional_id)

    def group_coordinator(self, group_id: str) -> int:
        """The broker coordinating consumer group ``group_id`` (leader of its __consumer_offsets partition)."""
        return self._coordinator_by_key("__consumer_offsets", group_id)

    def share_coordinator(self, group_id: str, topic: str, partition: int) -> int:
        """The share coordinator of one share-partition (group, topic id, partition)."""
        topic_id = self.topic_id(topic)
        return self._coordinator_by_key("__share_group_state", f"{group_id}:{topic_id}:{partition}")

    def share_coordinators(self, group_id: str, topic: str) -> dict[int, int]:
        """Share coordinator per partition of ``topic`` for share group ``group_id``."""
        return {p: self.share_coordinator(group_id, topic, p) for p in self.partition_metadata(topic)}

    def topic_id(self, topic: str, timeout_s: float = 15.0) -> str:
        """The topic's id. A topic just created may still be unknown to the broker asked (each
        broker's metadata catches up on its own): that answer is retried, any other raised."""
        from confluent_kafka import KafkaError, KafkaException, TopicCollection

        def describe() -> str:
            try:
                desc = self.admin().describe_topics(TopicCollection([topic]), request_timeout=10)[topic].result()
            except KafkaException as exc:
                if exc.args and getattr(exc.args[0], "code", lambda: None)() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                    raise _NotYetKnown(str(exc)) from None
                raise
            return topic_id_string(desc.topic_id)

        try:
            return wait_until(describe, timeout_s, 0.25, f"no broker knew topic {topic}", retry_on=(_NotYetKnown,))
        except WaitTimeout as exc:
            raise ClusterError(str(exc)) from None

    def active_controller(self) -> int:
        """The KRaft quorum leader. Backends override with cheaper sources."""

        return describe_quorum_leader(self)

    def unregistered_brokers(self) -> list[int]:
        """The brokers the cluster's metadata does not list now: stopped, or fenced by the
        controller (a broker whose heartbeats stopped). One metadata read; raises if it fails."""
        return sorted({n.node_id for n in self.brokers} - set(self.admin().list_topics(timeout=5).brokers))

    def wait_healthy(self, timeout_s: float = 60.0) -> None:
        """Wait until every broker is registered and no partition is under-replicated."""

        started = last_said = time.monotonic()
        wrong = "the brokers' metadata was never read"  # what was still wrong: the timeout names it

        def healthy() -> bool:
            nonlocal last_said, wrong
            missing = self.unregistered_brokers()
            under = [] if missing else self.under_replicated_partitions()
            wrong = (f"brokers {missing} not registered" if missing else
                     f"{len(under)} partitions under-replicated")
            if (missing or under) and time.monotonic() - last_said >= HEAL_PROGRESS_S:
                last_said = time.monotonic()
                say(f"waiting for a healthy cluster: {time.monotonic() - started:.0f}s of at most {timeout_s:.0f}s; {wrong}")
            return not missing and not under

        try:
            wait_until(healthy, timeout_s, 0.5, "cluster did not become healthy", retry_on=(Exception,))
        except WaitTimeout as exc:
            raise ClusterError(f"{exc}: {wrong}") from None


def topic_id_string(uuid: Any) -> str:
    """Kafka's printed form of a topic id: URL-safe base64 of the 16 bytes, no padding.

    Not ``str()`` of the client's Uuid: librdkafka prints standard base64 ('+' and '/'),
    which is a different string (and a different coordinator-key hash) for about half
    of all ids."""
    raw = struct.pack(">qq", uuid.get_most_significant_bits(), uuid.get_least_significant_bits())
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def java_string_hash(value: str) -> int:
    """``java.lang.String.hashCode`` (over UTF-16 code units, 32-bit wrap-around)."""
    h = 0
    for unit in _utf16_units(value):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h >= (1 << 31) else h


def _utf16_units(value: str) -> Iterator[int]:
    data = value.encode("utf-16-be")
    for i in range(0, len(data), 2):
        yield (data[i] << 8) | data[i + 1]


def coordinator_partition(key: str, partitions: int) -> int:
    """Kafka's ``Utils.abs(key.hashCode()) % partitions`` (abs(MIN_VALUE) is 0 there)."""
    h = java_string_hash(key)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def wait_for_process_exit(pids: list[int], timeout_s: float) -> bool:
    return gone_within(lambda: any(is_alive(p) for p in pids), timeout_s, 0.1)
