"""The transactional consume-transform-produce workload: topics, seeder, workers, drain, reads."""

from __future__ import annotations

import hashlib
import time
from typing import Any, Callable

from kchaos.clusters.base import Cluster, Role
from kchaos.clusters.clients import create_topic
from kchaos.clusters.kafka_tools import broker_transaction_state
from kchaos.errors import ClusterError
from kchaos.rundir import RunDir
from kchaos.waiting import WaitTimeout, wait_until
from kchaos.workloads.dump import dump_all, stable_offsets
from kchaos.workloads.history import HistoryWriter
from kchaos.workloads.pool import WorkerPool
from kchaos.workloads.seeder import Seeder
from kchaos.workloads.spec import WorkloadSpec


class _DrainCancelled(Exception):
    pass


class CtpWorkload:
    def __init__(self, spec: WorkloadSpec, cluster: Cluster, run: RunDir, seed: int, history: HistoryWriter):
        self.spec = spec
        self.cluster = cluster
        self.run = run
        self.seed = seed
        self.history = history
        # Unique per run, so that runs against one external cluster never share transactional.ids.
        self.txid_prefix = "kchaos-" + hashlib.blake2b(str(run.path).encode(), digest_size=4).hexdigest()
        self.client = cluster.client_config()
        self.seeder: Seeder | None = None
        self.pool: WorkerPool | None = None
        self._offset_reader: Any = None

    @property
    def user_topics(self) -> list[str]:
        return [self.spec.input_topic, *self.spec.output_topics]

    def setup(self) -> None:
        rf = min(3, len(self.cluster.brokers) or 3)
        create_topic(self.cluster, self.spec.input_topic, self.spec.input_partitions, rf)
        for topic in self.spec.output_topics:
            create_topic(self.cluster, topic, self.spec.output_partitions, rf)
        self.history.event("setup", {"topics": self.user_topics, "replication_factor": rf,
                                     "txid_prefix": self.txid_prefix}, outcome="ok")

    def start(self) -> None:
        history_dir = self.run.path / "history"
        self.seeder = Seeder(self.client, self.spec.input_topic, self.spec.records, self.spec.rate, self.seed,
                             history_dir / "seeder.jsonl", f"{self.txid_prefix}-seeder",
                             abort_fraction=self.spec.seed_abort_fraction, mark_aborted=self.spec.lineage == "id")
        self.pool = WorkerPool(self.spec, self.client, self.run.path, self.seed, self.txid_prefix, self.history)
        self.seeder.start()
        self.pool.start()

    # -- progress --------------------------------------------------------------------------
    def committed_offsets(self) -> dict[int, int]:
        """The group's committed offsets, read by a consumer that never joins the group.

        Not ``AdminClient.list_consumer_group_offsets``: while group coordinators were being
        killed, librdkafka 2.16 aborted the whole harness in that path
        (``rd_kafka_enq_once_del_source_return: eonce->refcnt > 0``).
        """
        from confluent_kafka import Consumer, TopicPartition

        if self._offset_reader is None:
            self._offset_reader = Consumer({**self.client, "log_level": 3, "group.id": self.spec.group_id,
                                            "enable.auto.commit": False})
        parts = [TopicPartition(self.spec.input_topic, p) for p in range(self.spec.input_partitions)]
        result = self._offset_reader.committed(parts, timeout=10)
        return {tp.partition: tp.offset for tp in result if tp.offset >= 0}

    def remaining_inputs(self) -> int | None:
        """Committed inputs not yet behind the group's committed offset (None: unknown now)."""
        assert self.seeder is not None
        try:
            committed = self.committed_offsets()
        except Exception:
            return None
        behind = 0
        for p, last in self.seeder.last_committed_offset.items():
            if committed.get(p, 0) <= last:
                behind += 1
        return behind + (0 if self.seeder.halted else self.spec.records - self.seeder.committed)

    def processed_inputs(self) -> int | None:
        """For progress: the sum of the group's committed offsets (input records behind them,
        counting the seeder's transaction markers too, so slightly high); None when unknown now."""
        try:
            return sum(max(0, o) for o in self.committed_offsets().values())
        except Exception:
            return None

    def halt_seeding(self) -> None:
        """No more inputs: the drain then waits only for those already committed."""
        if self.seeder is not None:
            self.seeder.halt()

    def drain(self, timeout_s: float, cancel: Callable[[], bool] | None = None) -> bool:
        """Wait until every seeded input is committed and processed (group offsets past it);
        False when ``timeout_s`` passes or ``cancel()`` says to stop waiting."""
        assert self.seeder is not None
        seeder = self.seeder

        def drained() -> bool:
            if seeder.error is not None:
                raise ClusterError(f"the input seeder failed: {seeder.error!r}")
            if cancel is not None and cancel():
                raise _DrainCancelled()
            return (seeder.done or seeder.halted) and self.remaining_inputs() == 0

        try:
            return wait_until(drained, timeout_s, 1.0, "inputs not all processed")
        except (WaitTimeout, _DrainCancelled):
            return False

    def stop(self) -> None:
        if self.pool is not None:
            self.pool.stop()
        if self.seeder is not None:
            self.seeder.stop()

    def close(self) -> None:
        self.stop()
        if self._offset_reader is not None:
            self._offset_reader.close()
            self._offset_reader = None

    def wait_stable(self, timeout_s: float) -> dict[str, Any]:
        """Liveness after heal: every user partition's LSO reaches its high watermark (no open
        transaction pins it) within ``timeout_s``. Returns the last snapshot and how long it took."""

        started = time.monotonic()
        while True:
            snapshot = stable_offsets(self.client, self.cluster.admin(), self.user_topics)
            pinned = {f"{t}-{p}": v for t, parts in snapshot.items() for p, v in parts.items() if v["lso"] < v["high"]}
            elapsed = time.monotonic() - started
            if not pinned or elapsed >= timeout_s:
                return {"stable": not pinned, "waited_s": round(elapsed, 1), "pinned": pinned, "timeout_s": timeout_s}
            time.sleep(1.0)

    def final_reads(self, liveness_timeout_s: float | None = None) -> dict[str, Any]:
        # An open transaction must end within its timeout (the coordinator aborts it); allow twice
        # the workload's transaction timeout plus 30 s before calling a pinned LSO hanging.
        if liveness_timeout_s is None:
            liveness_timeout_s = self.spec.transaction_timeout_ms / 1000 * 2 + 30
        liveness = self.wait_stable(liveness_timeout_s)
        summary = dump_all(self.client, self.cluster.admin(), self.user_topics, self.run.path / "topics")
        summary["liveness"] = liveness
        try:
            summary["group_offsets"] = {str(p): o for p, o in sorted(self.committed_offsets().items())}
        except Exception as exc:
            summary["group_offsets_error"] = repr(exc)
        assert self.seeder is not None
        summary["seeder"] = {"committed": self.seeder.committed, "aborted_batches": self.seeder.aborted_batches,
                             "last_committed_offset": {str(p): o for p, o in self.seeder.last_committed_offset.items()}}
        summary["worker_restarts"] = self.pool.restarts if self.pool else 0
        # whether the log cleaner removed internal records the verifier reads (offset commits)
        try:
            summary["compaction"] = self.cluster.cleaned_offsets()
        except Exception as exc:
            summary["compaction"] = {"error": repr(exc)}
        pinned = [(name.rsplit("-", 1)[0], int(name.rsplit("-", 1)[1])) for name in (liveness.get("pinned") or {})]
        summary["broker_transactions"] = self._broker_transactions(pinned)
        return summary

    def _broker_transactions(self, pinned: list[tuple[str, int]]) -> dict[str, Any]:
        """Coordinators' and partition leaders' own view after heal (list, find-hanging)."""

        try:
            brokers = [n.node_id for n in self.cluster.nodes if Role.BROKER in n.roles]
            return broker_transaction_state(self.cluster, brokers, pinned)
        except Exception as exc:  # external clusters without tools: say so, never guess
            return {"error": f"could not ask the brokers: {exc}"}

    def snapshot(self) -> dict[str, Any]:
        """For live progress lines."""
        seeded = self.seeder.committed if self.seeder else 0
        return {"seeded": seeded, "restarts": self.pool.restarts if self.pool else 0}
