"""One consume-transform-produce worker process: ``python -m kchaos.workloads.ctp_worker CONFIG.json``.

Per poll batch, in exactly-once mode: begin; transform every input into K outputs (lineage
contract, workloads/lineage.py); ``send_offsets_to_transaction`` with the consumer's group
metadata; commit (or abort a seeded fraction on purpose, then rewind to the committed offsets).

Errors are handled as a correct application must:

* abortable (``txn_requires_abort``): abort, rewind to the committed position, go on;
* retriable on commit (e.g. a timeout): retry the commit; if it never answers, the outcome is
  unknown (``info``) and the worker exits 12 so the harness restarts it from committed state;
* fenced or fatal: record it and exit 10 (fenced) or 11 (fatal). The harness restarts a
  worker that is still current; a zombie that was replaced stays dead.

SIGTERM asks for a graceful stop: the current transaction finishes, then exit 0.

Negative controls (``delivery`` != exactly-once) produce, flush and then commit offsets with
the consumer, outside any transaction; ``at-least-once-no-idempotence`` also turns the
producer's idempotence off. ``after_failed_transaction = "carry-on"`` keeps the transactions but
does not rewind after one it had to abort because something failed: only a fault that fails a
transaction shows it.
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
import signal
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from kchaos.clusters.client_security import resolve_env_refs
from kchaos.workloads.client_settings import (BATCH_GATHER_S, classic_consumer_defaults, client_id,
                                              confluent_producer_conf, group_instance_id)
from kchaos.workloads.history import HistoryWriter
from kchaos.workloads.lineage import Lineage
from kchaos.workloads.spec import WorkloadSpec

EXIT_STOPPED, EXIT_FENCED, EXIT_FATAL, EXIT_UNKNOWN = 0, 10, 11, 12
#: the timeout each transactional call is given (seconds): longer than Kafka takes to move a dead
#: broker's partitions and coordinators (its broker.session.timeout.ms, 12 s on kchaos' clusters,
#: 9 s by default, and an election), so a fault that heals is ridden out rather than failed
CALL_TIMEOUT_S = 30.0
#: send_offsets_to_transaction's own: it also outlasts a failover (measured here: 12.5 s after a
#: group coordinator's kill), and it is the call librdkafka lets hang (below), so it is kept short
SEND_OFFSETS_TIMEOUT_S = 15.0
#: librdkafka's transactional calls can block past their own timeout: send_offsets_to_transaction
#: never checks it for its coordinator requests (confluentinc/librdkafka#5456) and hangs for good
#: once the group coordinator's broker left the metadata (#5511); seen here when a partition fenced
#: the group coordinator. A production application guards them as a liveness probe would: past
#: its timeout and this grace, the worker records it and exits (unknown outcome); the harness
#: restarts it from the committed offsets
WATCHDOG_GRACE_S = 3.0
FENCED_CODES = {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH,
                KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                # static membership: the slot's next process took the member over (KIP-345)
                KafkaError.FENCED_INSTANCE_ID}
_PID_RE = re.compile(r"PID\{Id:(\d+),Epoch:(\d+)\}")


#: how long a worker whose static member id is still held by its killed predecessor waits before
#: it exits (KIP-848's session, 10 s in the default campaign, ends meanwhile or at the next try)
UNRELEASED_INSTANCE_WAIT_S = 4.0


class Fenced(Exception):
    pass


class Fatal(Exception):
    pass


class UnknownOutcome(Exception):
    pass


class PidCapture(logging.Handler):
    """librdkafka's ``debug=eos`` log says ``Acquired PID{Id:N,Epoch:E}``: keep the latest."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.pid: int | None = None
        self.epoch: int | None = None
        #: librdkafka's own words when it fenced this producer (produce() only says "_FATAL")
        self.fenced: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if record.levelno >= logging.ERROR:
            # librdkafka's errors (a fence, a failed transaction) go to the worker's log, as they
            # would without this handler: the evidence of why a worker exited
            print(f"{time.time():.3f} {logging.getLevelName(record.levelno)} {message}", file=sys.stderr, flush=True)
        if self.fenced is None and "fenced" in message.lower() and ("fatal" in message.lower() or "FATAL" in record.name):
            self.fenced = message
        if "Acquired PID" in message or "changed PID" in message:
            match = _PID_RE.findall(message)
            if match:
                self.pid, self.epoch = int(match[-1][0]), int(match[-1][1])


class LoggedProducer(Producer):
    """A producer whose librdkafka log goes to a Python logger, with flush() raising what it
    would raise without one. confluent-kafka 2.16 raises a fatal error (a fence) from its error
    callback and leaves the exception set, and flush() goes on serving callbacks in 200 ms
    chunks: the next log line then calls Python with that exception pending, and flush() raises
    SystemError chained from it. The worker exited "crashed" instead of "fenced" (CI,
    2026-11-24). Reproduced on a real broker: a fenced producer's flush(5) raised SystemError in
    8 of 8 tries with a logger, KafkaException without one; poll() and commit_transaction()
    raise KafkaException either way."""

    def flush(self, *args: Any, **kwargs: Any) -> int:
        try:
            return super().flush(*args, **kwargs)
        except SystemError as exc:
            cause = exc.__cause__ or exc.__context__
            if isinstance(cause, KafkaException):
                raise cause from None
            raise


def _error(exc: BaseException) -> KafkaError | None:
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0]
    return None


class Worker:
    def __init__(self, config: dict[str, Any]):
        self.config = config
        self.spec = WorkloadSpec.model_validate(config["workload"])
        self.worker = config["worker"]
        self.incarnation = int(config["incarnation"])
        self.client = resolve_env_refs(config["client"])  # its secrets are references in the file
        self.process = f"{self.worker}.{self.incarnation}"
        self.history = HistoryWriter(Path(config["history_path"]), self.process)
        self.rng = random.Random(f"{config['seed']}:{self.worker}:{self.incarnation}")
        self.txid_prefix = config["txid_prefix"]
        self.stopping = False
        self.txn_seq = 0
        self.producers: dict[str, Producer] = {}
        self.pid_capture: dict[str, PidCapture] = {}
        self.consumer: Consumer | None = None
        self.current_txid: str | None = None
        self.rewinds = 0
        #: assignment changes seen (on_assign, on_revoke): a poll that spans one discards its inputs
        self.rebalances = 0
        #: the transactional call under way: (name, since, timeout), for the watchdog
        self._blocked: tuple[str, float, float] | None = None
        threading.Thread(target=self._watch, name="watchdog", daemon=True).start()

    # -- watchdog --------------------------------------------------------------------------
    @contextmanager
    def _call(self, name: str, timeout_s: float) -> Iterator[None]:
        """A blocking librdkafka call, watched: see WATCHDOG_GRACE_S."""
        self._blocked = (name, time.monotonic(), timeout_s)
        try:
            yield
        finally:
            self._blocked = None

    def _watch(self) -> None:
        while True:
            time.sleep(1.0)
            blocked = self._blocked
            if blocked is None:
                continue
            name, since, timeout_s = blocked
            waited = time.monotonic() - since
            if waited > timeout_s + WATCHDOG_GRACE_S:
                self.history.event("exit-unknown", {"reason": f"watchdog: {name} blocked {waited:.0f}s past its "
                                                              f"{timeout_s:.0f}s timeout", "watchdog": name},
                                   **self._fields(self.current_txid))
                exit_process(EXIT_UNKNOWN)

    # -- clients ---------------------------------------------------------------------------
    def _fields(self, txid: str | None) -> dict[str, Any]:
        cap = self.pid_capture.get(txid or "")
        return {"worker": self.worker, "incarnation": self.incarnation, "txid": txid,
                "pid": cap.pid if cap else None, "epoch": cap.epoch if cap else None}

    def _new_producer(self, txid: str | None) -> Producer:
        spec = self.spec
        conf: dict[str, Any] = {**confluent_producer_conf(self.client, spec.producer_for("confluent")), "log_level": 3,
                                "client.id": client_id(self.worker, "producer")}
        if txid is not None:
            capture = PidCapture()
            logger = logging.getLogger(f"rdkafka.{txid}")
            logger.setLevel(logging.DEBUG)
            logger.propagate = False
            logger.addHandler(capture)
            self.pid_capture[txid] = capture
            conf.update({"transactional.id": txid, "transaction.timeout.ms": spec.transaction_timeout_ms,
                         "enable.idempotence": True, "debug": "eos", "log_level": 7, "logger": logger})
        elif spec.delivery == "at-least-once":
            conf["enable.idempotence"] = True
        else:  # at-least-once-no-idempotence: retries may duplicate and reorder
            conf.update({"enable.idempotence": False, "max.in.flight.requests.per.connection": 5,
                         "retries": 1000000, "retry.backoff.ms": 50})
        producer = LoggedProducer(conf) if txid is not None else Producer(conf)
        if txid is not None:
            op = self.history.invoke("init", {}, **self._fields(txid))
            try:
                with self._call("init_transactions", 60):
                    producer.init_transactions(60)
            except KafkaException as exc:
                self.history.complete(op, "init", "fail", error=str(exc), **self._fields(txid))
                raise Fatal(f"init_transactions failed: {exc}") from None
            producer.poll(0)  # serve the debug log so the PID is known
            self.history.complete(op, "init", "ok", **self._fields(txid))
        return producer

    def _new_consumer(self) -> Consumer:
        spec = self.spec
        classic = spec.group_protocol == "classic"
        conf: dict[str, Any] = {
            **self.client, **(classic_consumer_defaults(spec) if classic else {}), **spec.consumer_for("confluent"),
            "log_level": 3, "group.id": spec.group_id, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "isolation.level": spec.isolation,
            "enable.partition.eof": False, "client.id": client_id(self.worker, "consumer"),
        }
        if classic:
            conf["session.timeout.ms"] = spec.session_timeout_ms
        else:
            conf["group.protocol"] = "consumer"
        instance = group_instance_id(spec, self.worker)
        if instance is not None:
            conf["group.instance.id"] = instance
        return Consumer(conf)

    def _partition_txid(self, partition: int) -> str:
        return f"{self.txid_prefix}-{self.spec.input_topic}-{partition}"

    # -- rebalance -------------------------------------------------------------------------
    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.rebalances += 1
        assigned = sorted(tp.partition for tp in partitions)
        self.history.event("assign", {"partitions": assigned}, outcome="ok", worker=self.worker,
                           incarnation=self.incarnation)
        if self.spec.transactional_id_strategy == "per-partition":
            for p in assigned:
                txid = self._partition_txid(p)
                if txid not in self.producers:
                    self.producers[txid] = self._new_producer(txid)

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.rebalances += 1
        self.history.event("revoke", {"partitions": sorted(tp.partition for tp in partitions)}, outcome="ok",
                           worker=self.worker, incarnation=self.incarnation)

    # -- main loop -------------------------------------------------------------------------
    def run(self) -> int:
        spec = self.spec
        try:
            if spec.transactional and spec.transactional_id_strategy == "per-worker":
                txid = f"{self.txid_prefix}-{self.worker}"
                self.producers[txid] = self._new_producer(txid)
            elif not spec.transactional:
                self.producers[""] = self._new_producer(None)
            self.consumer = self._new_consumer()
            self.consumer.subscribe([spec.input_topic], on_assign=self._on_assign, on_revoke=self._on_revoke)
            while not self.stopping:
                msgs = self._poll_batch()
                if not msgs:
                    continue
                self._record_poll(msgs)
                if not spec.transactional:
                    self._process_at_least_once(msgs)
                elif spec.transactional_id_strategy == "per-worker":
                    self._process_transaction(self.producers[f"{self.txid_prefix}-{self.worker}"],
                                              f"{self.txid_prefix}-{self.worker}", msgs)
                else:
                    by_partition: dict[int, list[Any]] = {}
                    for m in msgs:
                        by_partition.setdefault(m.partition(), []).append(m)
                    rewinds = self.rewinds
                    for p, part_msgs in sorted(by_partition.items()):
                        if self.rewinds != rewinds:
                            # an abort rewound *every* assigned partition: the rest of this batch
                            # will be consumed again; processing it now would duplicate it
                            break
                        txid = self._partition_txid(p)
                        if txid not in self.producers:
                            self.producers[txid] = self._new_producer(txid)
                        self._process_transaction(self.producers[txid], txid, part_msgs)
            return EXIT_STOPPED
        except Fenced as exc:
            self.history.event("fenced", {"reason": str(exc)}, **self._fields(self.current_txid))
            return EXIT_FENCED
        except Fatal as exc:
            self.history.event("fatal", {"reason": str(exc)}, **self._fields(self.current_txid))
            return EXIT_FATAL
        except UnknownOutcome as exc:
            self.history.event("exit-unknown", {"reason": str(exc)}, **self._fields(self.current_txid))
            return EXIT_UNKNOWN
        except KafkaException as exc:  # raised outside a transaction step (poll, consume, close)
            err = _error(exc)
            fenced = err is not None and err.code() in FENCED_CODES
            self.history.event("fenced" if fenced else "fatal", {"reason": str(exc)}, **self._fields(self.current_txid))
            return EXIT_FENCED if fenced else EXIT_FATAL
        finally:
            self._close()

    def _poll_batch(self) -> list[Any]:
        """Up to ``max_batch`` inputs: wait (up to 0.5 s) for the first, then gather for at most
        BATCH_GATHER_S. librdkafka's consume(n, timeout) would wait the whole timeout for n
        messages, a floor per transaction whenever inputs arrive slower than n per poll."""
        assert self.consumer is not None
        rebalances = self.rebalances
        first = self.consumer.consume(1, 0.5)
        if not first:
            return []
        rest = self.consumer.consume(self.spec.max_batch - 1, BATCH_GATHER_S) if self.spec.max_batch > 1 else []
        self._raise_fatal_consumer_error(first + rest)
        msgs = [m for m in first + rest if m.error() is None]
        if self.rebalances != rebalances and msgs:
            return self._discard_across_rebalance(msgs)
        return msgs

    @staticmethod
    def _raise_fatal_consumer_error(msgs: list[Any]) -> None:
        """A consumer that librdkafka made fatal (its other errors come and go with the brokers) can
        never be used again: the worker exits (fenced at FENCED_INSTANCE_ID, else fatal) and the
        pool starts another; so does one that left its group because the worker was blocked past
        max.poll.interval.ms. Under KIP-848 a static member restarted while the process it replaces
        still holds its instance id in the group (killed, it never left) is answered
        UNRELEASED_INSTANCE_ID, fatal, until that member's session ends: the worker waits a
        while before it exits, as a restarted application backs off, instead of restarting on
        the pool's 1 s backoff until then."""
        for m in msgs:
            err = m.error()
            if err is not None and err.code() == KafkaError._MAX_POLL_EXCEEDED:
                # the consumer left the group (a static member "temporarily"); librdkafka 2.16's
                # KIP-848 static member then never rejoined (seed 501, 2026-11-28): start afresh
                raise KafkaException(err)
            if err is None or not (err.fatal() or err.code() == KafkaError._FATAL):
                continue
            if err.code() == KafkaError.UNRELEASED_INSTANCE_ID or "still used by another member" in err.str():
                time.sleep(UNRELEASED_INSTANCE_WAIT_S)
            raise KafkaException(err)

    def _discard_across_rebalance(self, msgs: list[Any]) -> list[Any]:
        """Inputs fetched in a poll during which the assignment changed are dropped, and the
        partitions still assigned are sought back to their committed offsets. Kept, an input of a
        partition revoked meanwhile would be processed by this worker and, once the partition's
        new owner has read the committed offset, by that owner too: both transactions commit,
        since the group coordinator checks a TxnOffsetCommit's generation, not who owns the
        partition (found by kchaos: a faultless run, a duplicate, 2026-11-23). librdkafka returns
        such inputs (confluent-kafka-python #1013), and this worker holds the first input of a
        batch across the next consume() call, where the revoke runs.

        Why the committed offset and not the first dropped input's: every transaction before this
        poll has ended, so for a partition held throughout the two are the same. For a partition
        assigned during the poll they are not. Its dropped inputs can be left over from an earlier
        assignment of it to this worker, and seeking to them moved the group's offset back past
        another worker's commits (``hunt-coordinator-crash`` seed 5, 2026-11-27: inputs 4@0 to
        4@46 processed again over a committed 47, found as duplicate and offsets-backwards)."""
        assert self.consumer is not None
        dropped: dict[int, int] = {}
        for m in msgs:
            dropped[m.partition()] = min(dropped.get(m.partition(), m.offset()), m.offset())
        assigned = {tp.partition for tp in self.consumer.assignment()}
        to_seek = [TopicPartition(self.spec.input_topic, p) for p in sorted(dropped) if p in assigned]
        seeks: dict[str, Any] | str = {}
        try:
            seeks = self._seek_to_committed(to_seek) if to_seek else {}
        except UnknownOutcome as exc:
            # without a position it can trust the worker must not consume on: it exits, and its
            # next incarnation starts from the committed offsets
            seeks = f"failed: {exc}"
            raise
        finally:
            self.history.event("discard", {"count": len(msgs), "reason": "the assignment changed during the poll",
                                           "inputs": {str(p): o for p, o in sorted(dropped.items())}, "seek": seeks},
                               outcome="ok", worker=self.worker, incarnation=self.incarnation)
        return []

    def _close(self) -> None:
        if self.consumer is not None:
            try:
                self.consumer.close()
            except Exception:
                pass
        for producer in self.producers.values():
            try:
                producer.flush(5)
            except KafkaException:
                pass  # a fenced or fatal producer refuses to flush; nothing of it may be written anyway
        self.history.close()

    def _record_poll(self, msgs: list[Any]) -> None:
        positions: dict[int, list[int]] = {}
        for m in msgs:
            first_last = positions.setdefault(m.partition(), [m.offset(), m.offset()])
            first_last[0] = min(first_last[0], m.offset())
            first_last[1] = max(first_last[1], m.offset())
        self.history.event("poll", {"count": len(msgs), "positions": {str(p): v for p, v in positions.items()}},
                           outcome="ok", worker=self.worker, incarnation=self.incarnation)

    def _produce_outputs(self, producer: Producer, msgs: list[Any], txid: str | None, txn_seq: int) -> int:
        spec = self.spec
        topics = spec.output_topics
        count = 0
        for m in msgs:
            key = m.key() or b""
            in_id = key.decode(errors="replace")
            for j in range(spec.outputs_per_input):
                lineage = Lineage(in_id, m.topic(), m.partition(), m.offset(), j, spec.outputs_per_input,
                                  self.worker, self.incarnation, txid, txn_seq)
                while True:
                    try:
                        producer.produce(topics[j % len(topics)], key=key, value=lineage.encode())
                        break
                    except BufferError:
                        producer.poll(0.1)
                count += 1
        producer.poll(0)
        return count

    def _simulate_processing(self, producer: Producer) -> None:
        """Transform time (``process_delay_ms``): outputs are on their way, nothing is committed yet.
        (``poll(timeout)`` returns as soon as it served an event, so loop until the time is up.)"""
        deadline = time.monotonic() + self.spec.process_delay_ms / 1000
        while (remaining := deadline - time.monotonic()) > 0:
            producer.poll(remaining)

    @staticmethod
    def _next_offsets(msgs: list[Any]) -> list[TopicPartition]:
        nxt: dict[tuple[str, int], int] = {}
        for m in msgs:
            key = (m.topic(), m.partition())
            nxt[key] = max(nxt.get(key, -1), m.offset() + 1)
        return [TopicPartition(t, p, o) for (t, p), o in sorted(nxt.items())]

    def _inputs(self, msgs: list[Any]) -> list[list[int]]:
        return [[m.partition(), m.offset()] for m in msgs]

    def _process_transaction(self, producer: Producer, txid: str, msgs: list[Any]) -> None:
        assert self.consumer is not None
        self.current_txid = txid
        self.txn_seq += 1
        seq = self.txn_seq
        offsets = self._next_offsets(msgs)
        offsets_json = {str(tp.partition): tp.offset for tp in offsets}
        try:
            producer.begin_transaction()
            op = self.history.invoke("send", {"txn_seq": seq, "inputs": self._inputs(msgs)}, **self._fields(txid))
            outputs = self._produce_outputs(producer, msgs, txid, seq)
            self.history.complete(op, "send", "ok", {"outputs": outputs}, **self._fields(txid))
            self._simulate_processing(producer)
            op = self.history.invoke("send_offsets", {"txn_seq": seq, "offsets": offsets_json}, **self._fields(txid))
            attempts = 0
            while True:
                attempts += 1
                try:
                    with self._call("send_offsets_to_transaction", SEND_OFFSETS_TIMEOUT_S):
                        producer.send_offsets_to_transaction(offsets, self.consumer.consumer_group_metadata(),
                                                             SEND_OFFSETS_TIMEOUT_S)
                    break
                except KafkaException as exc:
                    err = _error(exc)
                    if err is not None and err.retriable() and attempts < 3:
                        continue  # librdkafka: a retriable error may be retried with the same call
                    self.history.complete(op, "send_offsets", "fail", {"attempts": attempts}, error=str(exc),
                                          **self._fields(txid))
                    if err is not None and err.retriable():
                        # still no answer: give the transaction up (abort), as for an abortable error
                        self._abort(producer, txid, seq, f"send_offsets kept failing: {err.str()}")
                        return
                    raise
            self.history.complete(op, "send_offsets", "ok", {"attempts": attempts}, **self._fields(txid))
            if self.rng.random() < self.spec.abort_fraction:
                with self._call("flush", CALL_TIMEOUT_S):
                    producer.flush(CALL_TIMEOUT_S)  # the aborted outputs must reach the log: the raw view shows them
                self._abort(producer, txid, seq, "intentional")
                return
            self._commit(producer, txid, seq, offsets_json)
        except KafkaException as exc:
            err = _error(exc)
            if err is not None and (err.code() in FENCED_CODES):
                raise Fenced(str(exc)) from None
            if err is not None and (err.fatal() or err.code() == KafkaError._FATAL):
                # produce() reports a fatal producer as a bare _FATAL (without the fatal flag);
                # librdkafka's log, served by poll(), says whether it was fenced. poll() itself may
                # raise the fatal error again, with its real code.
                try:
                    producer.poll(0)
                except KafkaException as again:
                    again_err = _error(again)
                    if again_err is not None and again_err.code() in FENCED_CODES:
                        raise Fenced(str(again)) from None
                fenced = self.pid_capture.get(txid) and self.pid_capture[txid].fenced
                if fenced:
                    raise Fenced(f"{exc} ({fenced})") from None
                raise Fatal(str(exc)) from None
            if err is not None and (err.txn_requires_abort() or err.code() == KafkaError._STATE):
                # produce() answers _STATE once the transaction has left IN_TRANSACTION: an abortable
                # or fatal error came in the background (its messages timed out, or it was fenced,
                # while this process was paused). abort_transaction() aborts, or says which error.
                self._abort(producer, txid, seq, f"error: {err.str()}")
                return
            raise Fatal(f"unexpected error in transaction {seq}: {exc}") from None

    def _commit(self, producer: Producer, txid: str, seq: int, offsets: dict[str, int]) -> None:
        op = self.history.invoke("commit", {"txn_seq": seq, "offsets": offsets}, **self._fields(txid))
        attempts = 0
        while True:
            attempts += 1
            try:
                with self._call("commit_transaction", CALL_TIMEOUT_S):
                    producer.commit_transaction(CALL_TIMEOUT_S)
                producer.poll(0)
                self.history.complete(op, "commit", "ok", {"attempts": attempts}, **self._fields(txid))
                return
            except KafkaException as exc:
                err = _error(exc)
                if err is not None and err.retriable() and attempts < 5:
                    continue  # librdkafka allows retrying commit_transaction after a retriable error
                if err is not None and err.txn_requires_abort():
                    # The commit did not happen: definitely not committed.
                    self.history.complete(op, "commit", "fail", {"attempts": attempts}, error=str(exc), **self._fields(txid))
                    raise
                # Fenced, fatal, or retries exhausted: the commit may or may not have happened.
                self.history.complete(op, "commit", "info", {"attempts": attempts}, error=str(exc), **self._fields(txid))
                if err is not None and err.code() in FENCED_CODES:
                    raise Fenced(str(exc)) from None
                if err is not None and err.fatal():
                    raise Fatal(str(exc)) from None
                raise UnknownOutcome(f"commit of transaction {seq} did not complete: {exc}") from None

    def _abort(self, producer: Producer, txid: str, seq: int, reason: str) -> None:
        op = self.history.invoke("abort", {"txn_seq": seq, "reason": reason}, **self._fields(txid))
        try:
            with self._call("abort_transaction", CALL_TIMEOUT_S):
                producer.abort_transaction(CALL_TIMEOUT_S)
        except KafkaException as exc:
            err = _error(exc)
            self.history.complete(op, "abort", "info", error=str(exc), **self._fields(txid))
            if err is not None and err.code() in FENCED_CODES:
                raise Fenced(str(exc)) from None
            raise Fatal(f"abort failed: {exc}") from None
        self.history.complete(op, "abort", "ok", **self._fields(txid))
        if reason != "intentional" and self.spec.after_failed_transaction == "carry-on":
            # the negative control: the failed batch's inputs are skipped, never processed again
            self.history.event("carry-on", {"txn_seq": seq, "reason": reason}, outcome="ok", worker=self.worker,
                               incarnation=self.incarnation)
            return
        self._rewind()

    def _rewind(self) -> None:
        """Seek every assigned partition back to its committed offset (the start when none)."""
        assert self.consumer is not None
        assignment = self.consumer.assignment()
        if not assignment:
            return
        offsets = self._seek_to_committed(assignment)
        self.rewinds += 1
        self.history.event("rewind", {"offsets": offsets}, outcome="ok",
                           worker=self.worker, incarnation=self.incarnation)

    def _seek_to_committed(self, partitions: list[TopicPartition]) -> dict[str, int]:
        """Seek each partition to its committed offset (the start when none); the offsets read,
        by partition. UnknownOutcome when they cannot be read or sought."""
        assert self.consumer is not None
        for attempt in range(10):
            try:
                committed = self.consumer.committed(partitions, timeout=10)
                break
            except KafkaException:
                time.sleep(0.5 * (attempt + 1))
        else:
            raise UnknownOutcome("could not read committed offsets to seek to")
        for tp in committed:
            target = TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING)
            try:
                self.consumer.seek(target)
            except KafkaException as exc:
                raise UnknownOutcome(f"seek to the committed offset failed: {exc}") from None
        return {str(tp.partition): tp.offset for tp in committed}

    def _process_at_least_once(self, msgs: list[Any]) -> None:
        """Negative control: produce, flush, then commit offsets outside any transaction."""
        assert self.consumer is not None
        producer = self.producers[""]
        self.txn_seq += 1
        seq = self.txn_seq
        op = self.history.invoke("send", {"txn_seq": seq, "inputs": self._inputs(msgs)}, **self._fields(None))
        outputs = self._produce_outputs(producer, msgs, None, seq)
        self._simulate_processing(producer)
        remaining = producer.flush(60)
        outcome = "ok" if remaining == 0 else "info"
        self.history.complete(op, "send", outcome, {"outputs": outputs, "unflushed": remaining}, **self._fields(None))
        if remaining:
            raise UnknownOutcome(f"{remaining} outputs not acknowledged within 60s")
        offsets = self._next_offsets(msgs)
        op = self.history.invoke("commit_offsets", {"txn_seq": seq, "offsets": {str(tp.partition): tp.offset for tp in offsets}},
                                 **self._fields(None))
        try:
            self.consumer.commit(offsets=offsets, asynchronous=False)
            self.history.complete(op, "commit_offsets", "ok", **self._fields(None))
        except KafkaException as exc:
            self.history.complete(op, "commit_offsets", "fail", error=str(exc), **self._fields(None))
            # The outputs are written but the position is not saved: they will be written again.


def main(argv: list[str] | None = None, worker_class: type[Worker] | None = None) -> int:
    """Run one worker process; ``worker_class`` lets the share worker reuse this entry point."""
    argv = argv if argv is not None else sys.argv[1:]
    # As kchaos' own worker: the config path is the argument. As an external command (bring your
    # own pipeline), it comes from the environment kchaos sets.
    config_path = argv[0] if argv else os.environ["KCHAOS_WORKER_CONFIG"]
    config = json.loads(Path(config_path).read_text())
    worker = (worker_class or Worker)(config)

    def stop(signum: int, frame: Any) -> None:
        worker.stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    return worker.run()


def exit_process(code: int) -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    # Clients are closed and the history is written; skip interpreter teardown, where slow
    # librdkafka destructors could let a late SIGTERM replace this exit code.
    os._exit(code)


if __name__ == "__main__":
    exit_process(main())
