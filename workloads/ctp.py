"""The transactional consume-transform-produce workload: topics, seeder, workers, drain, reads."""

from __future__ import annotations

import hashlib
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from kchaos.clusters.base import Cluster, Role
from kchaos.clusters.clients import create_topic
from kchaos.errors import ClusterError
from kchaos.log import client_log, say
from kchaos.rundir import RunDir
from kchaos.runtime.kafka_tools import abort_open_transactions, broker_transaction_state, describe_streams_group
from kchaos.waiting import WaitTimeout, wait_until
from kchaos.workloads.dump import dump_all, stable_offsets
from kchaos.workloads.epoch_ageing import EXHAUSTED_EPOCH, age_transactional_ids, staggered_targets
from kchaos.workloads.group_view import describe_consumer_group
from kchaos.workloads.history import HistoryWriter
from kchaos.workloads.observer import Observers
from kchaos.workloads.pool import WorkerPool
from kchaos.workloads.seeder import Seeder
from kchaos.workloads.spec import ObserverSpec, WorkloadSpec
from kchaos.workloads.work_monitor import WorkMonitor


#: how often the drain says how far it is
DRAIN_PROGRESS_S = 15.0
#: the group's committed offsets are kept as a sample at most this often (lag over time, for the
#: liveness checks: final.json ``progress``)
PROGRESS_SAMPLE_S = 2.0


class _DrainCancelled(Exception):
    pass


class CtpWorkload:
    def __init__(self, spec: WorkloadSpec, cluster: Cluster, run: RunDir, seed: int, history: HistoryWriter,
                 observers: ObserverSpec | None = None):
        self.spec = spec
        self.observer_spec = observers
        self.cluster = cluster
        self.run = run
        self.seed = seed
        self.history = history
        # Unique per run, so that runs against one external cluster never share transactional.ids.
        self.txid_prefix = "kchaos-" + hashlib.blake2b(str(run.path).encode(), digest_size=4).hexdigest()
        self.client = cluster.client_config()
        self.seeder: Seeder | None = None
        self.pool: WorkerPool | None = None
        self.observers: Observers | None = None
        #: the workers' progress as their histories record it (faults/pacing.py reads it)
        self.work: WorkMonitor | None = None
        self._offset_reader: Any = None
        #: the progress printer and the pacer (a pipeline without a history) both read the offsets
        self._offset_lock = threading.Lock()
        #: (time, {partition: committed offset}) every PROGRESS_SAMPLE_S at most, as read
        self.progress_samples: list[tuple[float, dict[int, int]]] = []
        #: the group coordinator's view of the group, when the drain began and when it ended
        self.group_views: dict[str, Any] = {}
        #: when the drain began and ended, and its bound (the liveness checks' recovery bound)
        self.drain_record: dict[str, Any] = {}

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
        if self.spec.epochs_before_rollover is not None:
            self._age_transactional_ids(self.spec.epochs_before_rollover)

    def _age_transactional_ids(self, epochs_before_rollover: int) -> None:
        """Bring the workers' transactional ids near the producer-epoch boundary (workloads/epoch_ageing.py)."""
        txids = self.spec.transactional_ids(self.txid_prefix)
        brokers = [(b.host, b.port) for b in self.cluster.admin().list_topics(timeout=30).brokers.values()]
        targets = staggered_targets(len(txids), epochs_before_rollover)
        say(f"ageing {len(txids)} transactional ids to epochs {', '.join(map(str, targets))} "
            f"({', '.join(str(EXHAUSTED_EPOCH - t) for t in targets)} bumps before each producer id must rotate)")
        started = time.monotonic()
        reached = age_transactional_ids(brokers, txids, epochs_before_rollover, self.spec.transaction_timeout_ms,
                                        self.history)
        seconds = time.monotonic() - started
        say(f"aged {len(reached)} ids in {seconds:.0f}s ({sum(r['inits'] for r in reached) / max(seconds, 0.01):.0f} "
            f"InitProducerId/s): " + ", ".join(f"{r['txid']} pid {r['producer_id']} epoch {r['epoch']}" for r in reached))

    def start(self) -> None:
        history_dir = self.run.path / "history"
        self.seeder = Seeder(self.client, self.spec.input_topic, self.spec.records, self.spec.rate, self.seed,
                             history_dir / "seeder.jsonl", f"{self.txid_prefix}-seeder",
                             abort_fraction=self.spec.seed_abort_fraction, mark_aborted=self.spec.lineage == "id")
        # the workers' config files get the settings with their secrets as references (they resolve them)
        self.pool = WorkerPool(self.spec, self.cluster.client_config_refs(), self.run.path, self.seed, self.txid_prefix, self.history)
        if self.observer_spec is not None and self.observer_spec.count:
            topics = {self.spec.input_topic: self.spec.input_partitions,
                      **{t: self.spec.output_partitions for t in self.spec.output_topics}}
            self.observers = Observers(self.observer_spec, self.client, topics, self.run.path / "observers")
            self.observers.start()  # first, so they see the topics from their first record
        # a pipeline without a history (Streams, a user's app) is paced by its group's offsets
        self.work = WorkMonitor(history_dir, own_workers=self.spec.own_workers,
                                offsets_reader=None if self.spec.own_workers or self.spec.kind == "share"
                                else self.committed_offsets)
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

        parts = [TopicPartition(self.spec.input_topic, p) for p in range(self.spec.input_partitions)]
        with self._offset_lock:
            if self._offset_reader is None:
                self._offset_reader = Consumer(client_log({**self.client, "log_level": 3,
                                                            "group.id": self.spec.group_id, "enable.auto.commit": False}))
            result = self._offset_reader.committed(parts, timeout=10)
        offsets = {tp.partition: tp.offset for tp in result if tp.offset >= 0}
        now = time.time()
        if not self.progress_samples or now - self.progress_samples[-1][0] >= PROGRESS_SAMPLE_S:
            self.progress_samples.append((now, dict(offsets)))
        return offsets

    def describe_group(self) -> dict[str, Any]:
        """The group coordinator's view of the pipeline's group: its state and each member with
        what the coordinator assigns it (the input partitions of its active tasks for a Kafka
        Streams group on KIP-1071's protocol). Recorded, never raised: a view that cannot be
        read says why."""
        at = time.time()
        if self.spec.kind == "share":  # no consumer group (the share ledger judges its progress)
            return {"at": round(at, 3), "error": "a share group: not described"}
        try:
            if self.spec.client == "streams" and self.spec.group_protocol == "streams":
                view = describe_streams_group(self.cluster, self.spec.group_id, self.spec.input_topic)
            else:
                view = self._describe_consumer_group()
        except Exception as exc:
            view = {"error": " ".join(str(exc).split())[:500]}
        return {"at": round(at, 3), **view}

    def brokers_at_end(self) -> dict[str, Any]:
        """The brokers' registration and the run's partitions' leaders now, for the liveness check
        broker-not-rejoined (verifier/liveness.py): the brokers the cluster has, those its
        metadata lists (a fenced or stopped broker is not listed), and the partitions of the
        run's topics with no leader. One metadata read, recorded with its error when it fails."""
        record: dict[str, Any] = {"at": round(time.time(), 3), "expected": sorted(n.node_id for n in self.cluster.brokers)}
        try:
            metadata = self.cluster.admin().list_topics(timeout=10)
        except Exception as exc:
            return {**record, "error": " ".join(repr(exc).split())[:300]}
        leaderless = [f"{name}-{p}" for name in self.user_topics if metadata.topics.get(name) is not None
                      for p, part in sorted(metadata.topics[name].partitions.items()) if part.leader < 0]
        return {**record, "registered": sorted(metadata.brokers), "leaderless": leaderless}

    def _describe_consumer_group(self) -> dict[str, Any]:
        # in a process of its own: librdkafka's admin group calls can abort the harness (group_view.py)
        return describe_consumer_group(self.client, self.spec.group_id, self.spec.input_topic)

    def _final_group_offsets(self, timeout_s: float = 60.0) -> dict[int, int]:
        """The group's committed offsets for the final reads, through a coordinator that may be
        moving (a preferred leader election moves ``__consumer_offsets`` partitions: NOT_COORDINATOR
        was seen in CI): retriable errors are retried until ``timeout_s``; the last one is raised,
        and the run then says the offsets were unreadable."""
        from confluent_kafka import KafkaError, KafkaException

        moving = {KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_NOT_AVAILABLE,
                  KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.REQUEST_TIMED_OUT,
                  KafkaError._TIMED_OUT, KafkaError._TRANSPORT}
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                return self.committed_offsets()
            except KafkaException as exc:
                error = exc.args[0] if exc.args else None
                retriable = isinstance(error, KafkaError) and (error.code() in moving or error.retriable())
                if not retriable or time.monotonic() > deadline:
                    raise
                say(f"final reads: the group's offsets: {error.str() if hasattr(error, 'str') else error}; asking again")
                time.sleep(0.5)  # the coordinator moves in well under a second; nothing to wait on but a new answer

    def remaining_inputs(self) -> int | None:
        """What the drain waits for, as one number (0: drained; None: unknown now): input
        partitions whose last seeded input the group has not committed past, plus the inputs not
        seeded yet (drain_left has them apart). A share workload counts otherwise (workloads/share.py)."""
        left = self.drain_left()
        return None if left is None or left[1] is None else left[0] + left[1]

    def drain_status(self) -> str:
        """The drain's progress line: what it still waits for, each quantity with its unit."""
        parts = self.drain_left()
        if parts is None:
            return "the group's offsets not readable"
        return (f"{parts[0]} input partitions not yet processed to their last seeded input, "
                + ("inputs still to seed unknown (seeding follows the run)" if parts[1] is None
                   else f"{parts[1]} inputs still to seed"))

    def drain_left(self) -> tuple[int, int | None] | None:
        """(input partitions whose last seeded input the group has not committed past, inputs not
        seeded yet: None while seeding follows the run); None while the group's offsets cannot be read."""
        assert self.seeder is not None
        try:
            committed = self.committed_offsets()
        except Exception:
            return None
        behind = sum(1 for p, last in self.seeder.last_committed_offset.items() if committed.get(p, 0) <= last)
        if self.seeder.halted:
            return behind, 0
        # seeding follows the run (records unset): what is yet to come is unknown until it is halted
        return behind, None if self.spec.records is None else self.spec.records - self.seeder.committed

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
        False when ``timeout_s`` passes or ``cancel()`` says to stop waiting. Says every
        DRAIN_PROGRESS_S how far it is: partitions still behind, inputs left to seed, the
        processing rate."""
        assert self.seeder is not None
        seeder = self.seeder
        started = time.monotonic()
        self.drain_record = {"started": round(time.time(), 3), "timeout_s": timeout_s}
        self.group_views["drain_start"] = self.describe_group()
        said = {"at": started, "processed": self.processed_inputs()}

        def drained() -> bool:
            if seeder.error is not None:
                raise ClusterError(f"the input seeder failed: {seeder.error!r}")
            if cancel is not None and cancel():
                raise _DrainCancelled()
            left = self.remaining_inputs()
            now = time.monotonic()
            if now - said["at"] >= DRAIN_PROGRESS_S:
                processed = self.processed_inputs()
                rate = ((processed - said["processed"]) / (now - said["at"])
                        if processed is not None and said["processed"] is not None else None)
                say(f"draining: {now - started:.0f}s of at most {timeout_s:.0f}s; {self.drain_status()}"
                    + (f"; the group consumes {rate:.0f} input offsets/s" if rate is not None else ""))
                said.update(at=now, processed=processed)
            return (seeder.done or seeder.halted) and left == 0

        try:
            done = wait_until(drained, timeout_s, 1.0, "inputs not all processed")
        except (WaitTimeout, _DrainCancelled):
            done = False
        # the workers are still up: what the coordinator then assigns to whom, beside what each
        # member says it holds (the history), is the evidence of an assignment nobody processes
        self.drain_record.update(ended=round(time.time(), 3), drained=done)
        self.group_views["drain_end"] = self.describe_group()
        self.processed_inputs()  # a last sample of the group's offsets, at the drain's end
        return done

    def stop(self) -> None:
        if self.pool is not None:
            self.pool.stop()
        if self.seeder is not None:
            self.seeder.stop()

    def close(self) -> None:
        self.stop()
        if self.observers is not None and any(o._thread.is_alive() for o in self.observers.observers):
            self.observers.stop(catch_up_s=0.1)  # an aborted run: what they saw is kept, not judged
        with self._offset_lock:
            if self._offset_reader is not None:
                self._offset_reader.close()
                self._offset_reader = None

    def wait_stable(self, timeout_s: float) -> dict[str, Any]:
        """Liveness after heal: every user partition's LSO, and that of the ``__consumer_offsets``
        partition holding the group's offsets, reaches its high watermark (no open transaction
        pins it) within ``timeout_s``. A transaction left open there (a TxnOffsetCommit that came
        after its transaction ended) stalls the whole group: its committed offsets can no longer
        be read (UNSTABLE_OFFSET_COMMIT). Returns the last snapshot and how long it took."""

        try:
            offsets = {"__consumer_offsets": [self.cluster.group_offsets_partition(self.spec.group_id)]}
            watched: dict[str, Any] = {"offsets_partition": f"__consumer_offsets-{offsets['__consumer_offsets'][0]}"}
        except ClusterError as exc:  # e.g. an external cluster that hides its internal topics: said, not guessed
            offsets, watched = {}, {"offsets_partition_error": exc.one_line()}
        return self._stable_within(timeout_s, offsets, watched)

    def _stable_within(self, timeout_s: float, offsets: dict[str, list[int]] | None = None,
                       watched: dict[str, Any] | None = None) -> dict[str, Any]:
        """Every partition of the user topics (and ``offsets``' partitions of other topics) stable,
        or ``timeout_s`` over: the last snapshot, how long it took, what was pinned."""
        from confluent_kafka import KafkaException

        started = time.monotonic()
        failed_reads, last_error = 0, ""
        while True:
            try:
                snapshot = stable_offsets(self.client, self.cluster.admin(), self.user_topics, offsets)
            except KafkaException as exc:
                # right after the heal a restarted leader may not answer ListOffsets yet (a read
                # timed out, 2026-11-27): asked again within the window, not the run's end
                snapshot, failed_reads, last_error = None, failed_reads + 1, " ".join(str(exc).split())
            elapsed = time.monotonic() - started
            if snapshot is not None:
                pinned = {f"{t}-{p}": v for t, parts in snapshot.items() for p, v in parts.items()
                          if v["lso"] < v["high"]}
                if not pinned or elapsed >= timeout_s:
                    return {"stable": not pinned, "waited_s": round(elapsed, 1), "pinned": pinned,
                            "timeout_s": timeout_s, **(watched or {}),
                            **({"failed_reads": failed_reads} if failed_reads else {})}
            elif elapsed >= timeout_s:
                raise ClusterError(f"the partitions' last stable offsets could not be read in {timeout_s:.0f}s after "
                                   f"the heal ({failed_reads} tries): {last_error}",
                                   "see the brokers' logs in the run directory (cluster/node-*/logs)")
            time.sleep(1.0)

    def _stable_then_recovered(self, liveness_timeout_s: float | None, recover_hanging: bool,
                               what: str) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """The final reads' first step (every workload kind): wait for ``what`` to be stable
        (wait_stable), then, when asked and something stayed pinned, recover it (_recover)."""
        # An open transaction must end within its timeout (the coordinator aborts it); allow twice
        # the workload's transaction timeout plus 30 s before calling a pinned LSO hanging.
        if liveness_timeout_s is None:
            liveness_timeout_s = self.spec.transaction_timeout_ms / 1000 * 2 + 30
        say(f"final reads: waiting for {what} (at most {liveness_timeout_s:.0f}s)")
        liveness = self.wait_stable(liveness_timeout_s)
        say(f"final reads: {'every partition stable' if liveness['stable'] else 'partitions still pinned'} after "
            f"{liveness['waited_s']}s")
        return liveness, self._recover(liveness) if recover_hanging and not liveness["stable"] else None

    def final_reads(self, liveness_timeout_s: float | None = None, recover_hanging: bool = False) -> dict[str, Any]:
        liveness, recovery = self._stable_then_recovered(
            liveness_timeout_s, recover_hanging, "every partition's last stable offset to reach its high watermark")
        with ThreadPoolExecutor(1, thread_name_prefix="kchaos-observers") as beside:
            observed = None
            if self.observers is not None:
                # the pipeline has stopped and every partition is stable: the observers catch up to
                # the high watermarks while the topics are dumped, not after (docs/benchmarks.md)
                say(f"final reads: the {self.observer_spec.count} observers catch up to the end of the topics, "
                    "beside the dumps")
                observed = beside.submit(self.observers.stop)
            say("final reads: reading every topic in both views")
            summary = dump_all(self.client, self.cluster.admin(), self.user_topics, self.run.path / "topics")
            if observed is not None:
                summary["observers"] = observed.result()
        summary["liveness"] = liveness  # before any recovery: the hang, if there was one, is the evidence
        if recovery is not None:
            summary["recovery"] = recovery
        try:
            summary["group_offsets"] = {str(p): o for p, o in sorted(self._final_group_offsets().items())}
        except Exception as exc:
            summary["group_offsets_error"] = repr(exc)
        assert self.seeder is not None
        summary["seeder"] = {"committed": self.seeder.committed, "aborted_batches": self.seeder.aborted_batches,
                             "last_committed_offset": {str(p): o for p, o in self.seeder.last_committed_offset.items()}}
        # what the liveness checks read (verifier/liveness.py): the group's committed offsets over
        # the run, the drain's bound, and the group coordinator's view of who owns what
        summary["progress"] = {"sample_s": PROGRESS_SAMPLE_S, "drain": self.drain_record,
                               "samples": [[round(t, 3), {str(p): o for p, o in sorted(offsets.items())}]
                                           for t, offsets in self.progress_samples]}
        summary["group"] = {"protocol": self.spec.group_protocol, "views": self.group_views}
        summary["brokers_at_end"] = self.brokers_at_end()  # the harness reads it again after its registration watch
        summary["worker_restarts"] = self.pool.restarts if self.pool else 0
        # whether the log cleaner removed internal records the verifier reads (offset commits)
        try:
            summary["compaction"] = self.cluster.cleaned_offsets()
        except Exception as exc:
            summary["compaction"] = {"error": repr(exc)}
        pinned = [(name.rsplit("-", 1)[0], int(name.rsplit("-", 1)[1])) for name in (liveness.get("pinned") or {})]
        say("final reads: asking the brokers for open and hanging transactions (KIP-664 tools)")
        summary["broker_transactions"] = self._broker_transactions(pinned)
        return summary

    def _recover(self, liveness: dict[str, Any]) -> dict[str, Any]:
        """KIP-664's recovery: abort what still pins each partition, then wait for the last stable
        offsets to reach the high watermarks again (at most one transaction timeout + 30 s)."""
        pinned = [(name.rsplit("-", 1)[0], int(name.rsplit("-", 1)[1])) for name in liveness.get("pinned") or {}]
        say(f"final reads: recovering {len(pinned)} pinned partitions with TransactionsCommand abort (KIP-664)")
        before = self._broker_transactions(pinned)  # the hang as the brokers saw it: the evidence
        try:
            aborted = abort_open_transactions(self.cluster, pinned)
        except Exception as exc:  # a failed recovery is recorded, never hidden
            return {"before": before, "aborted": [], "error": repr(exc), "recovered": False}
        after = self.wait_stable(self.spec.transaction_timeout_ms / 1000 + 30)
        say(f"final reads: recovery {'worked' if after['stable'] else 'did not unpin every partition'}: "
            f"{sum(a['outcome'] == 'aborted' for a in aborted)} transactions aborted")
        return {"before": before, "aborted": aborted, "liveness_after": after, "recovered": after["stable"]}

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
