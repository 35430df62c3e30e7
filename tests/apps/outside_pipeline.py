"""A consume-transform-produce app written outside kchaos (it imports nothing of it), as a user
would bring one: it reads the KCHAOS_* environment, follows the lineage contract of
docs/workload.md, and records no history. Modes:

    python outside_pipeline.py safe     offsets sent in the transaction (KIP-447): exactly-once
    python outside_pipeline.py unsafe   outputs committed in a transaction, offsets committed
                                        afterwards by the consumer: a crash in between redoes work
    python outside_pipeline.py copy     as safe, but no lineage at all: each input's key and value
                                        copied unchanged to every output topic (an unmodified app,
                                        verified by identity lineage)
    python outside_pipeline.py copy-uncommitted
                                        as copy, reading read_uncommitted: copies aborted inputs

    python outside_pipeline.py MODE N   at most N records per transaction (default 50), taken
                                        as they come (a poll waits 200 ms at most)

A commit (or the init, or an abort) that fails with a retriable error (a coordinator moving, a
timeout) is made again, as the client's documentation asks; a retriable error of the offsets'
call, or an error that requires an abort, aborts and rewinds;
anything else (fenced, fatal) exits, and kchaos starts the app again. On SIGTERM it leaves the
group at once (its open transaction is abandoned, and the group does not wait out its session).

After each commit it prints ``committed <seq>`` and does 300 ms of bookkeeping, so a test can
crash it in the same place in both modes.
"""

import json
import os
import signal
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

MODE = sys.argv[1]
BATCH = int(sys.argv[2]) if len(sys.argv) > 2 else 50
ENV = os.environ
OUTPUTS = ENV["KCHAOS_OUTPUT_TOPICS"].split(",")
K = json.loads(open(ENV["KCHAOS_WORKER_CONFIG"]).read())["workload"]["outputs_per_input"]
WORKER, INCARNATION, TXID = ENV["KCHAOS_WORKER"], int(ENV["KCHAOS_INCARNATION"]), ENV["KCHAOS_TRANSACTIONAL_ID"]

consumer = Consumer({"bootstrap.servers": ENV["KCHAOS_BOOTSTRAP_SERVERS"], "group.id": ENV["KCHAOS_GROUP_ID"],
                     "isolation.level": "read_uncommitted" if MODE == "copy-uncommitted" else "read_committed", "enable.auto.commit": False,
                     "auto.offset.reset": "earliest", "session.timeout.ms": 10000, "log_level": 3})
producer = Producer({"bootstrap.servers": ENV["KCHAOS_BOOTSTRAP_SERVERS"], "transactional.id": TXID,
                     "transaction.timeout.ms": 10000, "log_level": 3})


def retried(call, *args, attempts: int = 6):
    """``call(*args)``, made again while it fails with a retriable error."""
    for attempt in range(attempts):
        try:
            return call(*args)
        except KafkaException as exc:
            if not exc.args[0].retriable() or attempt == attempts - 1:
                raise
            time.sleep(0.5)


retried(producer.init_transactions, 30)
consumer.subscribe([ENV["KCHAOS_INPUT_TOPIC"]])


def rewind() -> None:
    """Back to the group's committed offsets after an aborted transaction."""
    for tp in consumer.committed(consumer.assignment(), timeout=30):
        consumer.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else 0))


def terminated(*_):
    raise SystemExit(128 + signal.SIGTERM)  # not 0: kchaos reads exit 0 as "stopped for good"


signal.signal(signal.SIGTERM, terminated)


def run() -> None:
    seq = 0
    while True:
        records = [m for m in consumer.consume(BATCH, 0.2) if m.error() is None]
        if not records:
            continue
        seq += 1
        positions = {}
        try:
            producer.begin_transaction()
            for m in records:
                for slot in range(K):
                    if MODE.startswith("copy"):
                        producer.produce(OUTPUTS[slot % len(OUTPUTS)], key=m.key(), value=m.value())
                        continue
                    value = {"in_id": m.key().decode(), "in_topic": m.topic(), "in_partition": m.partition(),
                             "in_offset": m.offset(), "slot": slot, "slots": K, "worker": WORKER,
                             "incarnation": INCARNATION, "txid": TXID, "txn_seq": seq}
                    producer.produce(OUTPUTS[slot % len(OUTPUTS)], key=m.key(), value=json.dumps(value))
                positions[(m.topic(), m.partition())] = m.offset() + 1
            offsets = [TopicPartition(t, p, o) for (t, p), o in positions.items()]
            if MODE != "unsafe":
                # not retried: a retriable error here is mostly a rebalance under way, which waits for
                # this consumer to poll again; retrying instead stalled the group (seed 40). The
                # transaction is aborted and its inputs read again once the group has settled
                producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 10)
            retried(producer.commit_transaction, 10)  # what is not retriable is handled below
        except KafkaException as exc:
            if exc.args[0].txn_requires_abort() or exc.args[0].retriable():
                retried(producer.abort_transaction, 10)
                rewind()
                continue
            raise  # fenced or fatal: exit, and kchaos restarts the app
        print(f"committed {seq}", flush=True)
        time.sleep(0.3)
        if MODE == "unsafe":
            consumer.commit(offsets=offsets, asynchronous=False)


try:
    run()
finally:
    consumer.close()  # leaves the group
