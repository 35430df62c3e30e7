"""kchaos' consume-transform-produce worker on aiokafka (asyncio).

It follows aiokafka's documented example, "Transactional Consume-Process-Produce"
(docs/examples/transaction_example.rst): a consumer with enable_auto_commit off and
read_committed, a producer with a transactional_id; per getmany() batch:
``async with producer.transaction():`` send every output, then
``send_offsets_to_transaction(commit_offsets, GROUP_ID)``. The transaction context commits when its
block ends and aborts when the block raises, and the example lets the error end the program
(nothing catches it): kchaos' worker does the same, with kchaos' exit codes (fenced 10, a commit
whose outcome is unknown 12, any other error 11), and the harness restarts it from the committed
offsets.

aiokafka sends TxnOffsetCommit v0 with the group id only (no generation or member id: no KIP-447
fencing) and EndTxn v0 (no KIP-890 part 2).

What kchaos adds: a seeded abort_fraction of transactions is aborted on purpose (an exception
raised inside the block, so the context aborts), after which the consumer is sought back to the
committed offsets (AIOKafkaConsumer.seek), as the Java worker does. The producer id and epoch are
read from the producer's transaction manager (``_txn_manager``, not public API: no side effect).

Static membership (KIP-345, workload.static_membership): the consumer's ``group_instance_id``. aiokafka
sends it in JoinGroup (v5) and SyncGroup (v3) but heartbeats with Heartbeat v0/v1, which carry
no instance id: a member whose id another process took hears UNKNOWN_MEMBER_ID, rejoins with the
same instance id and takes it back. aiokafka 0.14.0 has no error for FENCED_INSTANCE_ID (82): its
``for_code`` makes it an UnknownError, so the worker cannot tell that fence from any other
unexpected error and records it as aiokafka raises it (fatal). Kafka's max.poll.interval.ms is
also the rebalance timeout, as the Java client sends it (aiokafka's own default is the session
timeout).
"""

from __future__ import annotations

import asyncio
import signal
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.abc import ConsumerRebalanceListener
from aiokafka.errors import KafkaError, ProducerFenced, TransactionalIdAuthorizationFailed

from kchaos_worker_common import (EXIT_FATAL, EXIT_FENCED, EXIT_STOPPED, EXIT_UNKNOWN, Exit, History, exit_process,
                                  lineage, load_config, log_client_warnings, positions, prop, record_settings, rng)

FENCED = (ProducerFenced, TransactionalIdAuthorizationFailed)


class IntentionalAbort(Exception):
    """Raised inside the transaction block so that aiokafka's context aborts it."""


class Worker:
    def __init__(self, config: dict[str, Any]):
        self.config = config
        self.wl = config["workload"]
        self.worker = config["worker"]
        self.incarnation = int(config["incarnation"])
        self.history = History(config["history_path"], f"{self.worker}.{self.incarnation}")
        self.rng = rng(config)
        self.transactional = self.wl["delivery"] == "exactly-once"
        self.txid = f"{config['txid_prefix']}-{self.worker}" if self.transactional else None
        self.topic = self.wl["input_topic"]
        self.stopping = False
        self.txn_seq = 0
        self.producer: AIOKafkaProducer | None = None
        self.consumer: AIOKafkaConsumer | None = None

    def fields(self) -> dict[str, Any]:
        pid = epoch = None
        manager = getattr(self.producer, "_txn_manager", None) if self.producer else None
        if manager is not None and manager.producer_id is not None and manager.producer_id >= 0:
            pid, epoch = manager.producer_id, manager.producer_epoch
        return {"worker": self.worker, "incarnation": self.incarnation, "txid": self.txid, "pid": pid, "epoch": epoch,
                "client": "aiokafka"}

    def slot(self) -> dict[str, Any]:
        return {"worker": self.worker, "incarnation": self.incarnation}

    def _producer(self) -> AIOKafkaProducer:
        c = self.config
        conf: dict[str, Any] = {"bootstrap_servers": c["client"]["bootstrap.servers"],
                                "client_id": f"kchaos-{self.worker}-producer", "acks": "all"}
        for name, key in (("linger.ms", "linger_ms"), ("retry.backoff.ms", "retry_backoff_ms"),
                          ("request.timeout.ms", "request_timeout_ms")):
            if prop(c, "producer", name) is not None:
                conf[key] = prop(c, "producer", name)
        if self.transactional:
            conf.update(transactional_id=self.txid, transaction_timeout_ms=self.wl["transaction_timeout_ms"])
        else:
            conf["enable_idempotence"] = self.wl["delivery"] == "at-least-once"
        return AIOKafkaProducer(**conf)

    def rebalance_timeout_ms(self) -> int:
        """Kafka's max.poll.interval.ms (client_settings.classic_consumer_defaults below the campaign's)."""
        return prop(self.config, "consumer", "max.poll.interval.ms") or max(60000, 2 * self.wl["transaction_timeout_ms"])

    def _consumer(self) -> AIOKafkaConsumer:
        c, wl = self.config, self.wl
        conf: dict[str, Any] = {
            "bootstrap_servers": c["client"]["bootstrap.servers"], "client_id": f"kchaos-{self.worker}-consumer",
            "group_id": wl["group_id"], "enable_auto_commit": False, "auto_offset_reset": "earliest",
            "isolation_level": wl["isolation"], "session_timeout_ms": wl["session_timeout_ms"],
            "heartbeat_interval_ms": 1000, "max_poll_interval_ms": self.rebalance_timeout_ms(),
            "rebalance_timeout_ms": self.rebalance_timeout_ms(), "group_instance_id": c.get("group_instance_id")}
        if prop(c, "consumer", "fetch.max.wait.ms") is not None:
            conf["fetch_max_wait_ms"] = prop(c, "consumer", "fetch.max.wait.ms")
        return AIOKafkaConsumer(**conf)

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._stop)
        try:
            record_settings(self.history, self.config, "aiokafka", self.wl["session_timeout_ms"],
                            self.rebalance_timeout_ms())
            self.producer = self._producer()
            if self.transactional:
                # start() initialises the producer id (InitProducerId): the init of the history
                op = self.history.invoke("init", {}, **self.fields())
                try:
                    await self.producer.start()
                except KafkaError as exc:
                    self.history.complete(op, "init", "fail", error=exc, **self.fields())
                    raise Exit(EXIT_FENCED if isinstance(exc, FENCED) else EXIT_FATAL,
                               "fenced" if isinstance(exc, FENCED) else "fatal", f"start: {exc!r}") from None
                await self.producer._txn_manager.wait_for_pid()
                self.history.complete(op, "init", "ok", **self.fields())
            else:
                await self.producer.start()
            self.consumer = self._consumer()
            worker = self

            class Listener(ConsumerRebalanceListener):
                def on_partitions_revoked(self, revoked: Any) -> None:
                    worker.history.event("revoke", {"partitions": sorted(tp.partition for tp in revoked)}, "ok",
                                         **worker.slot())

                def on_partitions_assigned(self, assigned: Any) -> None:
                    value = {"partitions": sorted(tp.partition for tp in assigned)}
                    if worker.config.get("group_instance_id"):
                        value["group_instance_id"] = worker.config["group_instance_id"]
                    worker.history.event("assign", value, "ok", **worker.slot())

            self.consumer.subscribe([self.topic], listener=Listener())
            await self.consumer.start()
            while not self.stopping:
                batch = await self.consumer.getmany(timeout_ms=500, max_records=self.wl["max_batch"])
                msgs = [m for records in batch.values() for m in records]
                if not msgs:
                    continue
                self.history.event("poll", {"count": len(msgs), "positions": positions(
                    [(m.partition, m.offset) for m in msgs])}, "ok", **self.slot())
                if self.transactional:
                    await self.transaction(batch, msgs)
                else:
                    await self.at_least_once(batch, msgs)
            return EXIT_STOPPED
        except Exit as exc:
            self.history.event(exc.f, {"reason": str(exc)}, **self.fields())
            return exc.code
        except KafkaError as exc:  # outside a transaction (getmany, start)
            fenced = isinstance(exc, FENCED)
            self.history.event("fenced" if fenced else "fatal", {"reason": repr(exc)}, **self.fields())
            return EXIT_FENCED if fenced else EXIT_FATAL
        finally:
            await self.close()

    def _stop(self) -> None:
        self.stopping = True

    async def close(self) -> None:
        for client in (self.consumer, self.producer):
            if client is not None:
                try:
                    await asyncio.wait_for(client.stop(), 10)
                except Exception:  # a fenced producer, an unreachable coordinator: nothing to keep
                    pass
        self.history.close()

    async def outputs(self, msgs: list[Any], seq: int) -> list[Any]:
        """Send every output; the futures of their acknowledgements."""
        assert self.producer is not None
        acks = []
        k = self.wl["outputs_per_input"]
        topics = self.wl["output_topics"]
        for m in msgs:
            key = m.key or b""
            for j in range(k):
                acks.append(await self.producer.send(topics[j % len(topics)], key=key, value=lineage(
                    key.decode(errors="replace"), m.topic, m.partition, m.offset, j, k, self.config, self.txid, seq)))
        return acks

    async def transaction(self, batch: dict[Any, list[Any]], msgs: list[Any]) -> None:
        assert self.producer is not None
        self.txn_seq += 1
        seq = self.txn_seq
        commit_offsets = {tp: records[-1].offset + 1 for tp, records in batch.items()}
        offsets_json = {str(tp.partition): o for tp, o in sorted(commit_offsets.items())}
        step, op = "begin", -1
        try:
            async with self.producer.transaction():
                step, op = "send", self.history.invoke("send", {"txn_seq": seq, "inputs": [[m.partition, m.offset] for m
                                                                                          in msgs]}, **self.fields())
                n = len(await self.outputs(msgs, seq))
                self.history.complete(op, "send", "ok", {"outputs": n}, **self.fields())
                if self.wl["process_delay_ms"]:
                    await asyncio.sleep(self.wl["process_delay_ms"] / 1000)
                step, op = "send_offsets", self.history.invoke("send_offsets", {"txn_seq": seq, "offsets": offsets_json},
                                                               **self.fields())
                await self.producer.send_offsets_to_transaction(commit_offsets, self.wl["group_id"])
                self.history.complete(op, "send_offsets", "ok", {"attempts": 1}, **self.fields())
                if self.rng.random() < self.wl["abort_fraction"]:
                    await self.producer.flush()  # the aborted outputs must reach the log: the raw view shows them
                    step, op = "abort", self.history.invoke("abort", {"txn_seq": seq, "reason": "intentional"},
                                                            **self.fields())
                    raise IntentionalAbort()
                step, op = "commit", self.history.invoke("commit", {"txn_seq": seq, "offsets": offsets_json},
                                                         **self.fields())
            self.history.complete(op, "commit", "ok", {"attempts": 1}, **self.fields())
        except IntentionalAbort:
            self.history.complete(op, "abort", "ok", **self.fields())
            await self.rewind()
        except KafkaError as exc:
            fenced = isinstance(exc, FENCED)
            if step == "commit":
                self.history.complete(op, "commit", "info", {"attempts": 1}, error=exc, **self.fields())
                raise Exit(EXIT_FENCED if fenced else EXIT_UNKNOWN, "fenced" if fenced else "exit-unknown",
                           f"commit of transaction {seq}: {exc!r}") from None
            if op >= 0:
                self.history.complete(op, step, "info" if step == "abort" else "fail", error=exc, **self.fields())
            if step not in ("begin", "abort"):
                # the context tried to abort on the way out; as in the example, the error ends the program
                self.history.event("abort", {"txn_seq": seq, "reason": f"error: {exc!r} (the transaction context)"},
                                   "info", **self.fields())
            raise Exit(EXIT_FENCED if fenced else EXIT_FATAL, "fenced" if fenced else "fatal",
                       f"{step} in transaction {seq}: {exc!r}") from None

    async def rewind(self) -> None:
        """Seek every assigned partition back to its committed offset (the start when none)."""
        assert self.consumer is not None
        done: dict[str, int] = {}
        for tp in sorted(self.consumer.assignment()):
            for attempt in range(10):
                try:
                    committed = await self.consumer.committed(tp)
                    break
                except KafkaError:
                    await asyncio.sleep(0.5 * (attempt + 1))
            else:
                raise Exit(EXIT_UNKNOWN, "exit-unknown", "could not read committed offsets to rewind after an abort")
            if committed is None:
                await self.consumer.seek_to_beginning(tp)
                done[str(tp.partition)] = -1001
            else:
                self.consumer.seek(tp, committed)
                done[str(tp.partition)] = committed
        self.history.event("rewind", {"offsets": done}, "ok", **self.slot())

    async def at_least_once(self, batch: dict[Any, list[Any]], msgs: list[Any]) -> None:
        """Negative control: produce, flush, then commit the offsets with the consumer."""
        assert self.producer is not None and self.consumer is not None
        self.txn_seq += 1
        seq = self.txn_seq
        op = self.history.invoke("send", {"txn_seq": seq, "inputs": [[m.partition, m.offset] for m in msgs]},
                                 **self.fields())
        acks = await self.outputs(msgs, seq)
        n = len(acks)
        if self.wl["process_delay_ms"]:
            await asyncio.sleep(self.wl["process_delay_ms"] / 1000)
        try:
            await asyncio.wait_for(asyncio.gather(*acks), 60)
        except (KafkaError, asyncio.TimeoutError) as exc:
            self.history.complete(op, "send", "info", {"outputs": n}, error=exc, **self.fields())
            raise Exit(EXIT_UNKNOWN, "exit-unknown", f"outputs not acknowledged: {exc!r}") from None
        self.history.complete(op, "send", "ok", {"outputs": n, "unflushed": 0}, **self.fields())
        offsets = {tp: records[-1].offset + 1 for tp, records in batch.items()}
        op = self.history.invoke("commit_offsets", {"txn_seq": seq, "offsets": {
            str(tp.partition): o for tp, o in sorted(offsets.items())}}, **self.fields())
        try:
            await self.consumer.commit(offsets)
            self.history.complete(op, "commit_offsets", "ok", **self.fields())
        except KafkaError as exc:
            self.history.complete(op, "commit_offsets", "fail", error=exc, **self.fields())


def main() -> int:
    log_client_warnings("aiokafka")
    return asyncio.run(Worker(load_config()).run())


if __name__ == "__main__":
    exit_process(main())
