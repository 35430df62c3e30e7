"""One worker of the ``txn`` workload: ``python -m kchaos.workloads.txn_worker CONFIG.json``.

Jepsen's ``:txn?`` shape rewritten for Kafka (issue 77, item 2): transactions that both send to and
poll the same topic-partitions, so that a write-read dependency can run from one worker's
transaction to another's and back, which is what the isolation-cycle checker
(verifier/isolation/cycles.py) needs to see a cycle. The keys are the ``txn_partitions`` partitions
of ``txn_topic``; every worker sends to and polls all of them.

A worker process has a transactional producer (``<prefix>-w<i>``, kept across the slot's
incarnations, so a new one fences its predecessor) and a read_committed consumer *assigned* (never
subscribed: no group, no offset commits) to every key from the beginning. At most ``txn_rate`` times
a second it plans a transaction of 1 to ``txn_max_ops`` micro-operations, each a poll with
probability ``txn_poll_fraction`` and otherwise a send of a new value to a random key, and runs it:
begin, the micro-operations in order, then commit (or, an ``abort_fraction`` of them, abort on
purpose, after a flush so that the aborted records reach the log).

A value is ``<process>-<n>`` (process = ``w<i>.<incarnation>``, n counting from 0 in the process):
unique per key across the whole run, which is what lets a poll name the transaction that wrote what
it read.

**The history.** One operation per transaction, ``f = "txn"``: the invoke (before
``begin_transaction``) holds the plan (every send's key and value is known before it is made, so a
process killed in the middle leaves its values' writer behind, as Jepsen's invoke does); the
completion holds what happened, the micro-operations in the order they were made (a send once
``produce()`` accepted it, with the offset its delivery report gave when one came by the end; a
poll with every record it returned, (partition, offset, value)), and how the transaction ended:

========================  =======  ==========================================================
``end``                   outcome  meaning
========================  =======  ==========================================================
``committed``             ok       ``commit_transaction`` returned
``aborted``               fail     ``abort_transaction`` returned (on purpose, or after an
                                   abortable error; ``abort_reason`` says which)
``abandoned``             fail     the abort was not confirmed (the producer was fenced or
                                   fatal), but no commit was ever requested, or its request was
                                   refused with an abortable error: it cannot have committed
``commit-unknown``        info     the commit was requested and never answered for good
                                   (retries exhausted, fenced or fatal during it): it may have
                                   committed; the checker settles it by the log
========================  =======  ==========================================================

A transaction whose completion is missing (the process was killed, or its watchdog ended it) has
an unknown outcome, exactly like ``info``. Beside it, the commit and abort calls are operations of
their own (``commit``, ``abort``, with ``txn_seq``), as the consume-transform-produce worker records
them: the nemesis paces its faults by them and aims a coordinator fault at a commit under way
(workloads/work_monitor.py).

**Errors** are handled as the consume-transform-produce worker does (workloads/ctp_worker.py):
abortable -> abort, and go on; fenced or fatal -> record it and exit 10 or 11 (the pool restarts
the slot: a new process, a new producer); a commit never answered -> exit 12. What to do after
which error, and what each ending records, are the small pure functions below
(:func:`after_step_error`, :func:`after_commit_error`, :func:`after_abort_error`,
:data:`OUTCOME_OF_ENDING`), unit-tested without Kafka.
"""

from __future__ import annotations

import itertools
import random
import time
from dataclasses import dataclass
from typing import Any, Iterator

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from kchaos.workloads.client_settings import client_id
from kchaos.workloads.ctp_worker import (CALL_TIMEOUT_S, EXIT_FATAL, EXIT_FENCED, EXIT_STOPPED, EXIT_UNKNOWN,
                                         FENCED_CODES, Fatal, Fenced, UnknownOutcome, Worker, exit_process, main)

#: how long a poll micro-operation waits for a first record when none is fetched already (seconds)
POLL_WAIT_S = 0.05
#: commit_transaction tries after retriable errors before the outcome is unknown (the ctp worker's)
COMMIT_ATTEMPTS = 5

# -- what a transaction does (pure) ---------------------------------------------------------------


@dataclass(frozen=True)
class PlannedSend:
    """A send of ``value`` to partition ``partition`` of the workload's topic."""

    partition: int
    value: str

    def as_json(self) -> dict[str, Any]:
        return {"f": "send", "partition": self.partition, "value": self.value}


@dataclass(frozen=True)
class PlannedPoll:
    """A poll of the consumer (assigned to every key)."""

    def as_json(self) -> dict[str, Any]:
        return {"f": "poll"}


def value_name(process: str, n: int) -> str:
    """The n-th value a process sends: unique per key across the run (a process name is unique)."""
    return f"{process}-{n}"


def plan_transaction(rng: random.Random, partitions: int, max_ops: int, poll_fraction: float,
                     values: Iterator[str]) -> tuple[PlannedSend | PlannedPoll, ...]:
    """1 to ``max_ops`` micro-operations, each a poll with probability ``poll_fraction``, else a
    send of the next of ``values`` to one of ``partitions`` keys, all drawn from ``rng``."""
    ops: list[PlannedSend | PlannedPoll] = []
    for _ in range(rng.randint(1, max_ops)):
        if rng.random() < poll_fraction:
            ops.append(PlannedPoll())
        else:
            ops.append(PlannedSend(rng.randrange(partitions), next(values)))
    return tuple(ops)


# -- what to do after an error, and what an ending records (pure) --------------------------------

RETRY, ABORT, FENCED, FATAL, UNKNOWN = "retry", "abort", "fenced", "fatal", "unknown"

#: how a transaction ended -> its history outcome (the module's docstring)
OUTCOME_OF_ENDING = {"committed": "ok", "aborted": "fail", "abandoned": "fail", "commit-unknown": "info"}


@dataclass(frozen=True)
class ErrorFacts:
    """What the worker's decisions read of an error: librdkafka's code and flags, and whether
    librdkafka's own log said it fenced the producer (produce() then reports a bare _FATAL)."""

    code: int | None
    fatal: bool = False
    retriable: bool = False
    txn_requires_abort: bool = False
    fenced_in_log: bool = False

    @classmethod
    def of(cls, exc: BaseException, fenced_in_log: bool = False) -> "ErrorFacts":
        err = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
        if not isinstance(err, KafkaError):
            return cls(None, fenced_in_log=fenced_in_log)
        return cls(err.code(), bool(err.fatal()), bool(err.retriable()), bool(err.txn_requires_abort()), fenced_in_log)

    @property
    def fenced(self) -> bool:
        return self.code in FENCED_CODES or self.fenced_in_log

    @property
    def is_fatal(self) -> bool:
        # produce() reports a fatal producer as a bare _FATAL, without the fatal flag
        return self.fatal or self.code == KafkaError._FATAL


def after_step_error(facts: ErrorFacts) -> str:
    """``begin_transaction``, a send (``produce``) or the flush before an abort on purpose raised:
    fenced or fatal -> exit; abortable (or _STATE: an abortable or fatal error came in the
    background, and abort_transaction says which) -> abort; anything else is unexpected -> fatal."""
    if facts.fenced:
        return FENCED
    if facts.is_fatal:
        return FATAL
    if facts.txn_requires_abort or facts.code == KafkaError._STATE:
        return ABORT
    return FATAL


def after_commit_error(facts: ErrorFacts, attempts: int, max_attempts: int = COMMIT_ATTEMPTS) -> str:
    """``commit_transaction`` raised after ``attempts`` tries: a retriable error is retried (librdkafka
    allows it) up to ``max_attempts``; an abortable one means it did not commit -> abort; fenced,
    fatal, or retries exhausted -> the outcome is unknown (FENCED, FATAL or UNKNOWN: each exits)."""
    if facts.retriable and not facts.fenced and not facts.is_fatal and attempts < max_attempts:
        return RETRY
    if facts.txn_requires_abort and not facts.fenced:
        return ABORT
    if facts.fenced:
        return FENCED
    if facts.is_fatal:
        return FATAL
    return UNKNOWN


def after_abort_error(facts: ErrorFacts) -> str:
    """``abort_transaction`` raised: the producer cannot go on -> FENCED or FATAL (exit)."""
    return FENCED if facts.fenced else FATAL


def ending_after_abort_failure(commit_requested: bool, commit_refused: bool) -> str:
    """How a transaction whose abort was not confirmed ended: ``abandoned`` (it cannot have
    committed) when no commit was requested or the request was refused as abortable, else
    ``commit-unknown``."""
    return "abandoned" if not commit_requested or commit_refused else "commit-unknown"


def exception_for(action: str, message: str) -> Exception:
    """What the worker raises to exit after ``action`` (FENCED, FATAL, UNKNOWN)."""
    return {FENCED: Fenced, FATAL: Fatal, UNKNOWN: UnknownOutcome}[action](message)


@dataclass(frozen=True)
class Ended:
    """How one transaction ended: its ``end`` (OUTCOME_OF_ENDING's key), the error that ended it
    otherwise than planned, why it was aborted, and the exception to raise once it is recorded."""

    end: str
    error: str | None = None
    abort_reason: str | None = None
    then: Exception | None = None

    @property
    def outcome(self) -> str:
        return OUTCOME_OF_ENDING[self.end]


class _ConsumerFailed(Exception):
    """The consumer returned a fatal error during a poll micro-operation."""


# -- the process -----------------------------------------------------------------------------------


class TxnWorker(Worker):
    def _new_assigned_consumer(self) -> Consumer:
        spec = self.spec
        conf: dict[str, Any] = {
            **self.client, **spec.consumer_for("confluent"), "log_level": 3,
            # librdkafka wants a group id; an assigned consumer never joins it, nor commits to it
            "group.id": f"{self.txid_prefix}-txn-{self.process}", "enable.auto.commit": False,
            "enable.auto.offset.store": False, "auto.offset.reset": "earliest", "isolation.level": spec.isolation,
            "enable.partition.eof": False, "client.id": client_id(self.worker, "consumer"),
        }
        consumer = Consumer(conf)
        consumer.assign([TopicPartition(spec.txn_topic, p, OFFSET_BEGINNING) for p in range(spec.txn_partitions)])
        self.history.event("assign", {"topic": spec.txn_topic, "partitions": list(range(spec.txn_partitions)),
                                      "from": "beginning", "isolation": spec.isolation}, outcome="ok",
                           worker=self.worker, incarnation=self.incarnation)
        return consumer

    def run(self) -> int:
        spec = self.spec
        txid = f"{self.txid_prefix}-{self.worker}"
        self.current_txid = txid
        try:
            producer = self._new_producer(txid)
            self.producers[txid] = producer
            self.consumer = self._new_assigned_consumer()
            values = (value_name(self.process, n) for n in itertools.count())
            interval = 1.0 / spec.txn_rate
            next_at = time.monotonic()
            while not self.stopping:
                if not self._pace(producer, next_at):
                    break
                next_at = max(next_at + interval, time.monotonic())
                plan = plan_transaction(self.rng, spec.txn_partitions, spec.txn_max_ops, spec.txn_poll_fraction, values)
                self._transaction(producer, txid, plan)
            return EXIT_STOPPED
        except Fenced as exc:
            self.history.event("fenced", {"reason": str(exc)}, **self._fields(txid))
            return EXIT_FENCED
        except Fatal as exc:
            self.history.event("fatal", {"reason": str(exc)}, **self._fields(txid))
            return EXIT_FATAL
        except UnknownOutcome as exc:
            self.history.event("exit-unknown", {"reason": str(exc)}, **self._fields(txid))
            return EXIT_UNKNOWN
        except KafkaException as exc:  # outside a transaction (init, assign)
            fenced = ErrorFacts.of(exc).fenced
            self.history.event("fenced" if fenced else "fatal", {"reason": str(exc)}, **self._fields(txid))
            return EXIT_FENCED if fenced else EXIT_FATAL
        finally:
            self._close()

    def _pace(self, producer: Producer, next_at: float) -> bool:
        """Wait until ``next_at`` serving the producer's callbacks; False when asked to stop meanwhile."""
        while (left := next_at - time.monotonic()) > 0:
            if self.stopping:
                return False
            producer.poll(min(left, 0.2))
        return not self.stopping

    def _transaction(self, producer: Producer, txid: str, plan: tuple[PlannedSend | PlannedPoll, ...]) -> None:
        """One transaction, recorded as one ``txn`` operation; raises (after recording it) what
        makes the process exit."""
        self.txn_seq += 1
        seq = self.txn_seq
        done: list[dict[str, Any]] = []
        op = self.history.invoke("txn", {"txn_seq": seq, "topic": self.spec.txn_topic,
                                         "plan": [step.as_json() for step in plan]}, **self._fields(txid))
        ended = self._attempt(producer, txid, seq, plan, done)
        try:
            producer.poll(0)  # the delivery reports that came meanwhile: the sends' offsets
        except KafkaException:
            pass  # a fatal producer raises its error again here; the ending already says it
        value: dict[str, Any] = {"txn_seq": seq, "end": ended.end, "ops": done}
        if ended.abort_reason is not None:
            value["abort_reason"] = ended.abort_reason
        self.history.complete(op, "txn", ended.outcome, value, error=ended.error, **self._fields(txid))
        if ended.then is not None:
            raise ended.then

    def _facts(self, exc: BaseException, txid: str) -> ErrorFacts:
        """The error's facts, with librdkafka's log asked (a poll serves it) whether it fenced the producer."""
        facts = ErrorFacts.of(exc)
        if facts.is_fatal and not facts.fenced:
            try:
                self.producers[txid].poll(0)
            except KafkaException as again:  # poll() may raise the fatal error again, with its real code
                if ErrorFacts.of(again).fenced:
                    return ErrorFacts.of(again)
            capture = self.pid_capture.get(txid)
            if capture is not None and capture.fenced:
                return ErrorFacts.of(exc, fenced_in_log=True)
        return facts

    def _attempt(self, producer: Producer, txid: str, seq: int, plan: tuple[PlannedSend | PlannedPoll, ...],
                 done: list[dict[str, Any]]) -> Ended:
        try:
            producer.begin_transaction()
            for step in plan:
                if isinstance(step, PlannedSend):
                    self._send(producer, step, done)
                else:
                    done.append({"f": "poll", "records": self._poll()})
            if self.rng.random() < self.spec.abort_fraction:
                with self._call("flush", CALL_TIMEOUT_S):
                    producer.flush(CALL_TIMEOUT_S)  # the aborted records must reach the log: the raw view shows them
                return self._abort(producer, txid, seq, "intentional", commit_requested=False, commit_refused=False)
        except KafkaException as exc:
            action = after_step_error(self._facts(exc, txid))
            if action == ABORT:
                return self._abort(producer, txid, seq, f"error: {exc}", commit_requested=False, commit_refused=False)
            return Ended("abandoned", str(exc), then=exception_for(action, str(exc)))
        except _ConsumerFailed as exc:  # the consumer cannot go on: end the transaction, then the process
            ended = self._abort(producer, txid, seq, f"poll failed: {exc}", commit_requested=False,
                                commit_refused=False)
            return Ended(ended.end, ended.error or str(exc), ended.abort_reason,
                         ended.then or Fatal(f"the consumer failed: {exc}"))
        return self._commit(producer, txid, seq)

    def _send(self, producer: Producer, step: PlannedSend, done: list[dict[str, Any]]) -> None:
        entry: dict[str, Any] = {"f": "send", "partition": step.partition, "value": step.value, "offset": None}

        def delivered(err: Any, msg: Any) -> None:
            if err is None:
                entry["offset"] = msg.offset()
            else:
                entry["delivery_error"] = str(err)

        while True:
            try:
                producer.produce(self.spec.txn_topic, value=step.value.encode(), key=self.process.encode(),
                                 partition=step.partition, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.1)
        done.append(entry)  # once produce() accepted it: a send it refused was never made
        producer.poll(0)

    def _poll(self) -> list[list[Any]]:
        """What the consumer returns now: (partition, offset, value) per record, in its order."""
        assert self.consumer is not None
        n = self.spec.txn_poll_max_records
        try:
            msgs = self.consumer.consume(n, 0)
            if not msgs:
                msgs = self.consumer.consume(1, POLL_WAIT_S)
                if msgs and n > 1:
                    msgs += self.consumer.consume(n - 1, 0)
            self._raise_fatal_consumer_error(msgs)
        except KafkaException as exc:
            raise _ConsumerFailed(str(exc)) from None
        return [[m.partition(), m.offset(), None if m.value() is None else m.value().decode(errors="replace")]
                for m in msgs if m.error() is None]

    def _commit(self, producer: Producer, txid: str, seq: int) -> Ended:
        op = self.history.invoke("commit", {"txn_seq": seq}, **self._fields(txid))
        attempts = 0
        while True:
            attempts += 1
            try:
                with self._call("commit_transaction", CALL_TIMEOUT_S):
                    producer.commit_transaction(CALL_TIMEOUT_S)
            except KafkaException as exc:
                action = after_commit_error(self._facts(exc, txid), attempts)
                if action == RETRY:
                    continue
                if action == ABORT:  # refused: it did not commit
                    self.history.complete(op, "commit", "fail", {"attempts": attempts}, error=str(exc),
                                          **self._fields(txid))
                    return self._abort(producer, txid, seq, f"commit failed: {exc}", commit_requested=True,
                                       commit_refused=True)
                self.history.complete(op, "commit", "info", {"attempts": attempts}, error=str(exc), **self._fields(txid))
                return Ended("commit-unknown", str(exc),
                             then=exception_for(action, f"commit of transaction {seq} did not complete: {exc}"))
            self.history.complete(op, "commit", "ok", {"attempts": attempts}, **self._fields(txid))
            return Ended("committed")

    def _abort(self, producer: Producer, txid: str, seq: int, reason: str, commit_requested: bool,
               commit_refused: bool) -> Ended:
        op = self.history.invoke("abort", {"txn_seq": seq, "reason": reason}, **self._fields(txid))
        try:
            with self._call("abort_transaction", CALL_TIMEOUT_S):
                producer.abort_transaction(CALL_TIMEOUT_S)
        except KafkaException as exc:
            self.history.complete(op, "abort", "info", error=str(exc), **self._fields(txid))
            action = after_abort_error(self._facts(exc, txid))
            return Ended(ending_after_abort_failure(commit_requested, commit_refused), str(exc), reason,
                         exception_for(action, f"abort failed: {exc}"))
        self.history.complete(op, "abort", "ok", **self._fields(txid))
        return Ended("aborted", None if reason == "intentional" else reason, reason)

    def _rewind(self) -> None:
        """Nothing to seek: the consumer commits no offsets, and an aborted transaction's polls are no part of
        the committed state."""


if __name__ == "__main__":
    exit_process(main(worker_class=TxnWorker))
