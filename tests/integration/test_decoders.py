"""Our internal-topic decoders agree with Kafka's own DumpLogSegments on the same segment files."""

from __future__ import annotations

import json
import re
import uuid

import pyarrow.parquet as pq
from confluent_kafka import Consumer, Producer, TopicPartition

from kchaos.clusters.clients import create_topic, quiet
from kchaos.harness.smoke import run_smoke
from kchaos.protocol.decoders import TXN_STATUS, decode_offsets_record, decode_transaction_record
from kchaos.runtime.kafka_tools import run_tool
from kchaos.workloads.dump import dump_topic

_LINE = re.compile(r"offset: (\d+) .*?key: (\{.*\}) payload: (\{.*\})\s*$")


def _tool_records(cluster, topic: str, decoder: str) -> dict[tuple[int, int], tuple[dict, dict]]:
    node = cluster.node(1)  # RF 3: node 1 holds a replica of every partition
    out = {}
    for part_dir in sorted(node.data_dir.glob(f"{topic}-*")):
        partition = int(part_dir.name.rsplit("-", 1)[1])
        for segment in sorted(part_dir.glob("*.log")):
            text = run_tool("dump-log", ["--files", str(segment), decoder, "--print-data-log"],
                            cluster.kafka_version).stdout
            for line in text.splitlines():
                match = _LINE.search(line)
                if match:
                    out[(partition, int(match.group(1)))] = (json.loads(match.group(2)), json.loads(match.group(3)))
    return out


def _ours(cluster, topic, tmp_path):
    dump_topic(cluster.client_config(), cluster.admin(), topic, "raw", tmp_path)
    return {(r["partition"], r["offset"]): r for r in pq.read_table(tmp_path / f"{topic}.raw.parquet").to_pylist()}


def test_transaction_log_decoder_matches_dumplogsegments(cluster3, tmp_path):
    assert run_smoke(cluster3, records=100, batch=25).ok  # committed transactions
    topic = f"dec-{uuid.uuid4().hex[:6]}"
    create_topic(cluster3, topic, 2, 3)
    producer = Producer(quiet({**cluster3.client_config(), "transactional.id": f"{topic}-tx"}))
    producer.init_transactions(60)
    producer.begin_transaction()
    producer.produce(topic, b"aborted", partition=1)
    producer.flush(30)
    producer.abort_transaction(60)  # an abort with partitions in the log
    ours = _ours(cluster3, "__transaction_state", tmp_path)
    tool = _tool_records(cluster3, "__transaction_state", "--transaction-log-decoder")
    common = sorted(set(ours) & set(tool))
    assert len(common) >= 10
    statuses = set()
    for pos in common:
        key, payload = tool[pos]
        entry = decode_transaction_record(ours[pos]["key"], ours[pos]["value"])
        data = payload["data"]
        assert entry.transactional_id == key["data"]["transactionalId"]
        assert entry.producer_id == data["producerId"] and entry.producer_epoch == data["producerEpoch"]
        assert entry.status == TXN_STATUS[data["transactionStatus"]]
        assert entry.timeout_ms == data["transactionTimeoutMs"]
        assert entry.last_update_ms == data["transactionLastUpdateTimestampMs"]
        assert entry.start_ms == data["transactionStartTimestampMs"]
        expected_parts = {p["topic"]: p["partitionIds"] for p in data["transactionPartitions"] or []}
        assert entry.partitions == expected_parts
        statuses.add(entry.status)
    assert {"Ongoing", "PrepareCommit", "CompleteCommit", "PrepareAbort", "CompleteAbort"} <= statuses


def test_offsets_decoder_matches_dumplogsegments(cluster3, tmp_path):
    group = f"dec-g-{uuid.uuid4().hex[:6]}"
    topic = f"dec-o-{uuid.uuid4().hex[:6]}"
    create_topic(cluster3, topic, 2, 3)
    consumer = Consumer(quiet({**cluster3.client_config(), "group.id": group}))
    for offset in (3, 7):
        consumer.commit(offsets=[TopicPartition(topic, 0, offset), TopicPartition(topic, 1, offset + 1)],
                        asynchronous=False)
    consumer.close()
    ours = _ours(cluster3, "__consumer_offsets", tmp_path)
    tool = _tool_records(cluster3, "__consumer_offsets", "--offsets-decoder")
    checked = 0
    for pos in sorted(set(ours) & set(tool)):
        key, payload = tool[pos]
        decoded = decode_offsets_record(ours[pos]["key"], ours[pos]["value"])
        if key["type"] in ("0", "1"):
            data = payload["data"]
            assert (decoded.group, decoded.topic, decoded.partition) == (
                key["data"]["group"], key["data"]["topic"], key["data"]["partition"])
            assert decoded.offset == data["offset"] and decoded.commit_timestamp == data["commitTimestamp"]
            assert decoded.leader_epoch == data.get("leaderEpoch", -1)
            checked += 1
        else:
            assert decoded["group_metadata"] == key["data"]["group"]
    ours_commits = [decode_offsets_record(r["key"], r["value"]) for r in ours.values()]
    mine = sorted((c.partition, c.offset) for c in ours_commits if getattr(c, "group", None) == group)
    assert mine == [(0, 3), (0, 7), (1, 4), (1, 8)]
    assert checked >= 4


def test_share_state_decoder_matches_dumplogsegments(cluster3, tmp_path):
    """Share-group state written by real acknowledgements (accept, release, reject), decoded by
    us and by DumpLogSegments --share-group-state-decoder, field by field."""
    from confluent_kafka import AcknowledgeType, ShareConsumer
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    import time

    from kchaos.protocol.share_state import decode_share_state_record

    topic, group = f"sdec-{uuid.uuid4().hex[:6]}", f"sg-{uuid.uuid4().hex[:6]}"
    create_topic(cluster3, topic, 2, 3)
    admin = cluster3.admin()
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(30)
    producer = Producer(quiet(cluster3.client_config()))
    for i in range(20):
        producer.produce(topic, key=str(i).encode(), value=b"v", partition=i % 2)
    producer.flush(30)
    consumer = ShareConsumer(quiet({**cluster3.client_config(), "group.id": group,
                                    "share.acknowledgement.mode": "explicit"}))
    consumer.subscribe([topic])
    seen, deadline = 0, time.monotonic() + 60
    while seen < 21 and time.monotonic() < deadline:
        msgs = [m for m in consumer.poll(2) if m.error() is None]
        for m in msgs:
            seen += 1
            key = int(m.key())
            kind = (AcknowledgeType.RELEASE if key == 3 and m.delivery_count() == 1 else
                    AcknowledgeType.REJECT if key == 5 else AcknowledgeType.ACCEPT)
            consumer.acknowledge(m, kind)
        if msgs:
            consumer.commit_sync(30)
    consumer.close()
    assert seen == 21  # 20 records, one of them released and delivered again
    ours = _ours(cluster3, "__share_group_state", tmp_path)
    tool = _tool_records(cluster3, "__share_group_state", "--share-group-state-decoder")
    common = [pos for pos in sorted(set(ours) & set(tool)) if tool[pos][0]["data"]["groupId"] == group]
    assert len(common) >= 4
    kinds = set()
    for pos in common:
        key, payload = tool[pos]
        rec = decode_share_state_record(ours[pos]["key"], ours[pos]["value"])
        data = payload["data"]
        kinds.add(rec.kind)
        assert rec.kind == {"0": "snapshot", "1": "update"}[str(key["type"])]
        assert (rec.group, rec.topic_id, rec.partition) == (key["data"]["groupId"], key["data"]["topicId"],
                                                          key["data"]["partition"])
        assert (rec.snapshot_epoch, rec.leader_epoch, rec.start_offset) == (data["snapshotEpoch"], data["leaderEpoch"],
                                                                          data["startOffset"])
        if rec.kind == "snapshot":
            assert rec.state_epoch == data["stateEpoch"]
        else:
            assert rec.delivery_complete_count == data.get("deliveryCompleteCount", -1)
        assert [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in rec.batches] == [
            (b["firstOffset"], b["lastOffset"], b["deliveryState"], b["deliveryCount"]) for b in data["stateBatches"]]
    assert kinds == {"snapshot", "update"}
    states = {b.delivery_state for pos in common for b in decode_share_state_record(ours[pos]["key"], ours[pos]["value"]).batches}
    assert {2, 4} <= states  # acknowledged and archived (the rejected record) both seen


_BATCH = re.compile(r"baseOffset: (\d+) lastOffset: (\d+) count: (\d+) baseSequence: (-?\d+) lastSequence: -?\d+ "
                    r"producerId: (-?\d+) producerEpoch: (-?\d+) partitionLeaderEpoch: (-?\d+) isTransactional: (\w+) "
                    r"isControl: (\w+) .*?CreateTime: (-?\d+)")
_MARKER = re.compile(r"\| offset: (\d+) .*endTxnMarker: (COMMIT|ABORT) coordinatorEpoch: (\d+)")


def test_segment_reader_matches_dumplogsegments_and_real_markers_agree_with_the_log(cluster3, tmp_path):
    """kchaos/protocol/log_segments.py reads a real broker's segments as DumpLogSegments does
    (headers, markers, coordinator epochs), and verifier/markers.py finds every COMMIT marker of
    a healthy broker prepared in the coordinator's log (no false unprepared marker)."""
    from kchaos.protocol.log_segments import read_partition
    from kchaos.verifier.markers import read_commit_markers, unprepared_commit_markers
    from kchaos.verifier.segments import read_replicas

    topic = f"seg-{uuid.uuid4().hex[:6]}"
    create_topic(cluster3, topic, 1, 3)
    producer = Producer(quiet({**cluster3.client_config(), "transactional.id": f"{topic}-tx"}))
    producer.init_transactions(60)
    for end in ("commit", "abort", "commit"):
        producer.begin_transaction()
        for i in range(3):
            producer.produce(topic, f"{end}-{i}".encode(), partition=0)
        producer.flush(30)
        getattr(producer, f"{end}_transaction")(60)
    part_dir = cluster3.node(1).data_dir / f"{topic}-0"
    tool_batches, tool_markers = [], {}
    for segment in sorted(part_dir.glob("*.log")):
        text = run_tool("dump-log", ["--files", str(segment), "--print-data-log"], cluster3.kafka_version).stdout
        for line in text.splitlines():
            if (b := _BATCH.search(line)) and not line.startswith("|"):
                tool_batches.append(tuple(int(g) if g.lstrip("-").isdigit() else g == "true" for g in b.groups()))
            elif m := _MARKER.search(line):
                tool_markers[int(m.group(1))] = (m.group(2) == "COMMIT", int(m.group(3)))
    ours = read_partition(part_dir)
    assert [(b.base_offset, b.last_offset, b.count, b.base_sequence, b.producer_id, b.producer_epoch, b.leader_epoch,
             b.transactional, b.control, b.max_timestamp) for b in ours] == tool_batches
    assert {b.base_offset: (b.committed, b.coordinator_epoch) for b in ours if b.control} == tool_markers
    assert sorted(committed for committed, _ in tool_markers.values()) == [False, True, True]
    firsts = [b.first_value for b in read_partition(part_dir, values=True) if not b.control]
    assert firsts[0] == b"commit-0" and b"abort-0" in firsts  # each data batch's first record, as produced

    markers = [m for m in read_commit_markers(read_replicas({"node-1": cluster3.node(1).data_dir})) if m["topic"] == topic]
    abort_at = next(b.base_offset for b in ours if b.committed is False)
    assert [m["covers_from"] for m in markers] == [0, abort_at + 1]  # the second commit's range starts after the abort
    log = [{"partition": r["partition"], "offset": r["offset"], "entry": decode_transaction_record(r["key"], r["value"])}
           for r in _ours(cluster3, "__transaction_state", tmp_path).values()]
    judged = unprepared_commit_markers(markers, [r for r in log if r["entry"] is not None])
    assert judged["unprepared"] == [] and judged["no_log_record_before"] == 0 and judged["commit_markers"] == 2
