"""The share-group (KIP-932) workload: seeder, share workers, group configs, ledger, KIP-1289.

Reuses the consume-transform-produce machinery (seeder, worker pool, history, final reads) and
changes what is consumer-group specific:

* **group configs** are set for the run through the admin API (``share.auto.offset.reset``
  earliest, ``share.isolation.level`` from ``workload.isolation``, record lock duration, delivery
  count limit), read back, and recorded in ``RUN_DIR/share_group.json``;
* **KIP-1289 detection**: transactional share acknowledgements need the client to offer them
  (a ``send_share_acknowledgements_to_transaction``-like producer call) and the cluster to
  finalise ``share.version >= 2`` and advertise ApiVersions key 93 (TxnShareAcknowledge). The
  detected facts and the resulting mode (``exactly-once`` or ``at-least-once``) are recorded;
  nothing is assumed;
* **progress** comes from the workers' own histories, read incrementally: an input is done once
  an acknowledgement commit that ACCEPTed or REJECTed it succeeded. (The persisted
  share-partition state, ``__share_group_state``, is decoded for the verifier, but its start
  offset can lag the broker's in-memory state after the last acknowledgement, so it cannot say
  "finished".)
"""

from __future__ import annotations

import struct
import time
from typing import Any

from kchaos.errors import ClusterError, ConfigError
from kchaos.log import say
from kchaos.protocol.share_state import SHARE_STATE_TOPIC, decode_share_state_record, positions_done, share_partition_state
from kchaos.protocol.wire import read_frame
from kchaos.runtime.kafka_tools import describe_features
from kchaos.waiting import WaitTimeout, wait_until
from kchaos.workloads.ctp import CtpWorkload
from kchaos.workloads.lineage import input_id
from kchaos.workloads.share_worker import is_poison
from kchaos.log import client_log

TXN_SHARE_ACKNOWLEDGE_API_KEY = 93
#: how often the drain asks the persisted share state about delivered inputs whose
#: acknowledgement no worker was answered
PERSISTED_STATE_EVERY_S = 10.0


def api_versions(host: str, port: int, timeout_s: float = 10.0) -> dict[int, tuple[int, int]]:
    """ApiVersions v0 over a plain socket: api key -> (min, max) the broker advertises."""
    import socket

    request = struct.pack(">hhi", 18, 0, 1) + struct.pack(">h", 6) + b"kchaos"
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        sock.sendall(struct.pack(">i", len(request)) + request)
        body = read_frame(sock)
    error, count = struct.unpack(">hi", body[4:10])
    if error:
        raise RuntimeError(f"ApiVersions answered error code {error}")
    out = {}
    for i in range(count):
        key, lo, hi = struct.unpack(">hhh", body[10 + 6 * i:16 + 6 * i])
        out[key] = (lo, hi)
    return out


def detect_kip1289(cluster: Any) -> dict[str, Any]:
    """Whether transactional share acknowledgements can be used: the client and the cluster."""
    import importlib.metadata

    from confluent_kafka import Producer

    client_method = next((m for m in dir(Producer) if "share" in m.lower() and "transaction" in m.lower()), None)
    facts: dict[str, Any] = {"client": f"confluent-kafka {importlib.metadata.version('confluent-kafka')}",
                             "client_supports": client_method is not None, "client_method": client_method}
    try:
        facts["share_version"] = describe_features(cluster).get("share.version")
    except Exception as exc:
        facts["share_version_error"] = str(exc)
    try:
        host, port = cluster.bootstrap_servers.split(",")[0].rsplit(":", 1)
        versions = api_versions(host, int(port))
        facts["broker_advertises_txn_share_acknowledge"] = TXN_SHARE_ACKNOWLEDGE_API_KEY in versions
    except Exception as exc:
        facts["api_versions_error"] = str(exc)
    supported = bool(facts["client_supports"] and facts.get("broker_advertises_txn_share_acknowledge")
                     and (facts.get("share_version") or 0) >= 2)
    facts["mode"] = "exactly-once" if supported else "at-least-once"
    reasons = []
    if not facts["client_supports"]:
        reasons.append(f"{facts['client']} has no transactional share acknowledgement call")
    if not facts.get("broker_advertises_txn_share_acknowledge"):
        reasons.append(f"the brokers do not advertise ApiVersions key {TXN_SHARE_ACKNOWLEDGE_API_KEY} (TxnShareAcknowledge)")
    if (facts.get("share_version") or 0) < 2:
        reasons.append(f"share.version is {facts.get('share_version')} (KIP-1289 needs 2)")
    facts["why"] = "; ".join(reasons) if reasons else "client and cluster support KIP-1289"
    return facts


#: Ground truth for the share checks, recorded before any worker runs: which inputs are poison.
POISON_FILE = "share_poison.json"


def poison_inputs(seed: int, records: int, fraction: float) -> dict[str, Any]:
    """The inputs the share workers must REJECT: the same seeded decision the workers make
    (workloads/share_worker.py), written to the run directory so that the checker reads it
    rather than re-running worker code."""

    ids = [input_id(seed, i) for i in range(records)]
    return {"seed": seed, "fraction": fraction, "records": records,
            "poison_ids": sorted(i for i in ids if is_poison(seed, i, fraction))}


class ShareWorkload(CtpWorkload):
    def setup(self) -> None:
        super().setup()
        self.share_facts = {"group_configs": self._configure_group(), "kip1289": detect_kip1289(self.cluster)}
        if self.share_facts["kip1289"]["mode"] == "exactly-once":
            # kchaos' share worker has no client call for it yet: say so rather than pretend
            self.share_facts["kip1289"]["used"] = False
            self.share_facts["kip1289"]["mode"] = "at-least-once"
            self.share_facts["kip1289"]["why"] += " (but kchaos' share worker cannot stage acknowledgements yet)"
        self.run.write_json("share_group.json", self.share_facts)
        self.history.event("share-setup", self.share_facts, outcome="ok")
        if self.spec.records is None:  # a campaign fills it (verifier/campaign.py); a spec built by hand must
            raise ConfigError("a share workload needs workload.records: its poison inputs are drawn before the run")
        self.run.write_json(POISON_FILE, poison_inputs(self.seed, self.spec.records, self.spec.share_poison_fraction))

    def _configure_group(self) -> dict[str, Any]:
        """Set the group configs; a config this Kafka version does not know at group level is
        recorded as such, with the broker-wide value that applies instead."""
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

        spec = self.spec
        wanted = {"share.auto.offset.reset": "earliest", "share.isolation.level": spec.isolation,
                  "share.record.lock.duration.ms": str(spec.share_lock_duration_ms),
                  "share.delivery.count.limit": str(spec.share_delivery_count_limit)}
        admin = self.cluster.admin()
        unsupported: dict[str, str] = {}
        for key, value in wanted.items():
            resource = ConfigResource(ResourceType.GROUP, spec.group_id, incremental_configs=[
                ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)])
            try:
                admin.incremental_alter_configs([resource])[resource].result(30)
            except KafkaException as exc:
                if "Unknown group config" not in str(exc) or key in ("share.auto.offset.reset", "share.isolation.level"):
                    raise ClusterError(f"could not set share group config {key}={value}: {exc}") from None
                unsupported[key] = str(exc.args[0].str() if exc.args else exc)
        mismatched: dict[str, Any] = {}
        actual: dict[str, Any] = {}

        def applied() -> bool:  # the group coordinator applies the change asynchronously
            described = admin.describe_configs([ConfigResource(ResourceType.GROUP, spec.group_id)])
            actual.clear()
            actual.update({k: e.value for k, e in next(iter(described.values())).result(30).items() if k in wanted})
            mismatched.clear()
            mismatched.update({k: (v, actual.get(k)) for k, v in wanted.items()
                               if k not in unsupported and actual.get(k) != v})
            return not mismatched

        try:
            wait_until(applied, 20, 0.5)
        except WaitTimeout:
            raise ClusterError(f"the share group configs did not take: {mismatched}") from None
        broker_wide = {}
        if unsupported:
            broker = next(n.node_id for n in self.cluster.nodes if n.is_broker)
            described = admin.describe_configs([ConfigResource(ResourceType.BROKER, str(broker))])
            entries = next(iter(described.values())).result(30)
            for key in unsupported:
                entry = entries.get(f"group.{key}")
                broker_wide[f"group.{key}"] = entry.value if entry is not None else None
        effective_limit = int(actual.get("share.delivery.count.limit")
                              or broker_wide.get("group.share.delivery.count.limit") or spec.share_delivery_count_limit)
        return {"set": actual, "not_group_configs_in_this_version": unsupported, "broker_wide": broker_wide,
                "effective_delivery_count_limit": effective_limit}

    # -- progress ----------------------------------------------------------------------------
    def input_topic_id(self) -> str:
        if getattr(self, "_topic_id", None) is None:
            self._topic_id = self.cluster.topic_id(self.spec.input_topic, timeout_s=30)
        return self._topic_id

    def remaining_inputs(self) -> int | None:
        """Seeded inputs not yet acknowledged for good: accepted or rejected with the
        acknowledgement commit answered ok, or, for a delivered input whose acknowledgement was
        never answered (a response lost, a worker killed), held as acknowledged, archived or
        complete by the share group's persisted state. The broker never delivers such an input
        again, so without the second source the drain would wait for it in vain (a healthy run
        reported unknown); the verifier judges both sources."""
        assert self.seeder is not None
        if getattr(self, "_acks", None) is None:
            self._acks = AckTracker(self.run.path / "history")
            self._persisted: set[tuple[int, int]] = set()
            self._persisted_read_at = 0.0
        done = self._acks.update()
        unanswered = self._acks.delivered - self._acks.done
        now = time.monotonic()
        # only once no more inputs come (the drain): during the workload every in-flight input is
        # "unanswered" for a moment, and reading the state log every 10 s would be wasted work
        seeding_over = self.seeder.done or self.seeder.halted
        if (seeding_over and done < self.spec.records and unanswered
                and now - self._persisted_read_at >= PERSISTED_STATE_EVERY_S):
            self._persisted_read_at = now
            try:
                self._persisted = persisted_done(self.client, self.spec.group_id, self.input_topic_id(), unanswered)
            except Exception as exc:  # the state could not be read now: the history alone decides
                say(f"the share group's persisted state could not be read ({exc}); the drain counts answered "
                    "acknowledgements only")
        return max(0, self.spec.records - done - len(self._persisted - self._acks.done))

    def drain_status(self) -> str:
        remaining = self.remaining_inputs()
        return f"{'?' if remaining is None else remaining} inputs not yet acknowledged for good"

    def processed_inputs(self) -> int | None:
        remaining = self.remaining_inputs()
        return None if remaining is None else self.spec.records - remaining

    def committed_offsets(self) -> dict[int, int]:
        return {}  # a share group has no committed offsets; progress is remaining_inputs()

    def final_reads(self, liveness_timeout_s: float | None = None, recover_hanging: bool = False) -> dict[str, Any]:
        summary = super().final_reads(liveness_timeout_s, recover_hanging)
        summary.pop("group_offsets", None)
        summary.pop("group_offsets_error", None)
        facts = getattr(self, "share_facts", {})
        summary["share"] = {**facts, "input_topic_id": self.input_topic_id(),
                            "lock_duration_ms": self.spec.share_lock_duration_ms,
                            "delivery_count_limit": (facts.get("group_configs") or {}).get(
                                "effective_delivery_count_limit", self.spec.share_delivery_count_limit)}
        return summary


def persisted_done(client: dict[str, Any], group: str, topic_id: str,
                   positions: set[tuple[int, int]]) -> set[tuple[int, int]]:
    """Of ``positions`` (input partition, offset), those the share group's persisted state
    (``__share_group_state``, read to its end and replayed) holds as done: below the start offset,
    acknowledged or archived."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    consumer = Consumer(client_log({**client, "log_level": 3, "group.id": f"kchaos-share-state-{time.time_ns()}",
                                    "enable.auto.commit": False, "enable.partition.eof": True,
                                    "isolation.level": "read_uncommitted", "fetch.wait.max.ms": 50}))
    records: dict[int, list[Any]] = {}
    try:
        meta = consumer.list_topics(SHARE_STATE_TOPIC, timeout=10).topics.get(SHARE_STATE_TOPIC)
        if meta is None or meta.error is not None:
            return set()
        pending = set(meta.partitions)
        consumer.assign([TopicPartition(SHARE_STATE_TOPIC, p, OFFSET_BEGINNING) for p in pending])
        deadline = time.monotonic() + 30
        while pending and time.monotonic() < deadline:
            for msg in consumer.consume(2000, 0.5):
                if msg.error() is not None:
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        pending.discard(msg.partition())
                    continue
                rec = decode_share_state_record(msg.key(), msg.value())
                if rec is not None and rec.group == group and rec.topic_id == topic_id:
                    records.setdefault(rec.partition, []).append(rec)
        if pending:
            return set()  # not read to its end: claim nothing
    finally:
        consumer.close()
    return positions_done({p: share_partition_state(recs) for p, recs in records.items()}, positions)


class AckTracker:
    """Reads the workers' history files as they grow; counts distinct inputs whose ACCEPT or
    REJECT was committed successfully, and keeps every input delivered."""

    def __init__(self, history_dir: Any):
        self.dir = history_dir
        self.positions: dict[str, int] = {}
        self.pending: dict[tuple[str, int], list[list[Any]]] = {}
        self.done: set[tuple[int, int]] = set()
        self.delivered: set[tuple[int, int]] = set()

    def update(self) -> int:
        import json

        for path in sorted(self.dir.glob("w*.jsonl")):
            with open(path, "rb") as fh:
                fh.seek(self.positions.get(path.name, 0))
                while True:
                    line = fh.readline()
                    if not line.endswith(b"\n"):
                        break  # a partial last line: read it next time
                    self.positions[path.name] = fh.tell()
                    r = json.loads(line)
                    if r.get("f") == "acquire" and r["type"] == "invoke":
                        self.delivered.update((p, o) for p, o, _ in r["value"].get("records", []))
                    if r.get("f") != "ack":
                        continue
                    key = (r["process"], r["op"])
                    if r["type"] == "invoke":
                        self.pending[key] = r["value"].get("acks", [])
                    else:
                        acks = self.pending.pop(key, [])
                        if r["type"] == "ok":
                            self.done.update((p, o) for p, o, kind in acks if kind in ("accept", "reject"))
        return len(self.done)
