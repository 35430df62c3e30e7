"""Observers: consumers that read the user topics throughout a run, faults included, and record
every record they got, so the verifier can judge what readers saw *during* the run and not only
the end state (Jepsen's read-side anomalies; Kafka's transactions_test runs such a reader).

Each observer is a thread of the harness with its own librdkafka consumer on the same client
path as the workers (through the cluster's proxies, so it meets the same faults). It *assigns*
every partition of the input and output topics from the beginning (no group, no rebalance to
hide anything) and reads at ``isolation`` (read_committed; read_uncommitted is the negative
control). Every consume() call that returns records is one poll, written as one line of
``observers/o<N>.jsonl``: ``{"poll": n, "t": time, "r": [[topic index, partition, offset,
crc32 of the value], ...]}``; the first line names the topics, the last says where the
observer stopped. The CRC identifies the record: the verifier compares it with the CRC of the
record the final log holds at that offset.

At the end of the run (after the final dumps) each observer catches up to the high watermarks
it reads then, for at most ``catch_up_s``, and records whether it got there: a committed record
no observer read is an anomaly only when the observers did catch up.
"""

from __future__ import annotations

import json
import threading
import time
import zlib
from pathlib import Path
from typing import Any

from kchaos.log import client_log
from kchaos.workloads.dump import watermark_offsets
from kchaos.workloads.spec import ObserverSpec

POLL_RECORDS = 500
POLL_TIMEOUT_S = 0.5
OBSERVATIONS = "observations.parquet"
SUMMARY = "summary.json"


def record_crc(value: bytes | None) -> int:
    """What identifies a record's content: CRC-32 of its value (Spark's crc32() is the same)."""
    return zlib.crc32(value or b"")


class Observer:
    def __init__(self, index: int, client: dict[str, Any], topics: dict[str, int], isolation: str, directory: Path):
        self.index = index
        self.client = client
        self.topics = dict(topics)  # topic -> partitions
        self.isolation = isolation
        self.path = directory / f"o{index}.jsonl"
        self.polls = 0
        self.records = 0
        self.errors: list[str] = []
        self.positions: dict[str, dict[str, int]] = {}
        self.caught_up: bool | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"observer-{index}", daemon=True)
        self._catch_up_s = 0.0
        self.error: BaseException | None = None

    def start(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._thread.start()

    def stop(self, catch_up_s: float) -> None:
        """Catch up to the high watermarks (at most ``catch_up_s``), then stop."""
        self._catch_up_s = catch_up_s
        self._stop.set()
        self._thread.join(timeout=catch_up_s + 60)

    def _consumer(self) -> Any:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        consumer = Consumer(client_log({**self.client, "group.id": f"kchaos-observer-{self.index}",
                                        "enable.auto.commit": False, "isolation.level": self.isolation,
                                        "auto.offset.reset": "earliest", "log_level": 3, "enable.partition.eof": False}))
        consumer.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t, n in self.topics.items() for p in range(n)])
        return consumer

    def _run(self) -> None:
        names = list(self.topics)
        index = {t: i for i, t in enumerate(names)}
        try:
            consumer = self._consumer()
        except BaseException as exc:
            self.error = exc
            return
        with self.path.open("w") as out:
            out.write(json.dumps({"observer": self.index, "topics": names, "isolation": self.isolation,
                                  "t": time.time()}) + "\n")
            try:
                while not self._stop.is_set():
                    self._poll(consumer, out, index)
                self.caught_up = self._catch_up(consumer, out, index)
            except BaseException as exc:  # recorded; the verifier then says the observations are incomplete
                self.error = exc
            finally:
                out.write(json.dumps({"end": True, "t": time.time(), "caught_up": self.caught_up,
                                      "positions": self.positions, "errors": self.errors[:20],
                                      "error": repr(self.error) if self.error else None}) + "\n")
                out.flush()
                consumer.close()

    def _poll(self, consumer: Any, out: Any, index: dict[str, int]) -> int:
        messages = consumer.consume(POLL_RECORDS, POLL_TIMEOUT_S)
        rows = []
        for m in messages:
            if m.error():
                if len(self.errors) < 1000:
                    self.errors.append(str(m.error()))
                continue
            rows.append([index[m.topic()], m.partition(), m.offset(), record_crc(m.value())])
        if rows:
            self.polls += 1
            self.records += len(rows)
            out.write(json.dumps({"poll": self.polls, "t": time.time(), "r": rows}, separators=(",", ":")) + "\n")
        return len(rows)

    def _catch_up(self, consumer: Any, out: Any, index: dict[str, int]) -> bool:
        """Read until every partition's position reaches the high watermark read now."""
        from confluent_kafka import TopicPartition

        parts = [TopicPartition(t, p) for t, n in self.topics.items() for p in range(n)]
        ends = {}
        for tp in parts:
            _, high = watermark_offsets(consumer, tp, 10.0)  # asked again while its leader moves
            ends[(tp.topic, tp.partition)] = high
        deadline = time.monotonic() + self._catch_up_s
        while True:
            position = {(tp.topic, tp.partition): tp.offset for tp in consumer.position(parts)}
            behind = {k: v for k, v in ends.items() if position.get(k, -1) < v and v > 0}
            self.positions = {f"{t}-{p}": {"position": position.get((t, p), -1), "high": ends[(t, p)]}
                              for t, p in sorted(ends)}
            if not behind:
                return True
            if time.monotonic() >= deadline:
                return False
            self._poll(consumer, out, index)


class Observers:
    """The run's observers: started with the workload, stopped after the final dumps."""

    def __init__(self, spec: ObserverSpec, client: dict[str, Any], topics: dict[str, int], directory: Path):
        self.spec = spec
        self.directory = directory
        self.observers = [Observer(i, client, topics, spec.isolation, directory) for i in range(spec.count)]

    def start(self) -> None:
        for o in self.observers:
            o.start()

    def stop(self, catch_up_s: float | None = None) -> dict[str, Any]:
        """Stop every observer (each catches up first, for at most ``catch_up_s``, by default the
        spec's), store the observations as Parquet, and return the summary (also in
        ``observers/summary.json``)."""
        limit = self.spec.catch_up_s if catch_up_s is None else catch_up_s
        threads = [threading.Thread(target=o.stop, args=(limit,)) for o in self.observers]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        rows = write_observations(self.directory)
        summary = {"count": len(self.observers), "isolation": self.spec.isolation, "rows": rows,
                   "observers": [{"observer": o.index, "polls": o.polls, "records": o.records,
                                  "caught_up": o.caught_up, "positions": o.positions,
                                  "errors": len(o.errors), "error": repr(o.error) if o.error else None}
                                 for o in self.observers]}
        (self.directory / SUMMARY).write_text(json.dumps(summary, indent=1))
        return summary


def read_observer_log(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any] | None]:
    """An observer's header, its polls, and its end line (None: it never wrote one)."""
    header: dict[str, Any] = {}
    polls, end = [], None
    with path.open() as f:
        for line in f:
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # a torn last line of a killed harness
            if "topics" in entry:
                header = entry
            elif entry.get("end"):
                end = entry
            elif "poll" in entry:
                polls.append(entry)
    return header, polls, end


def write_observations(directory: Path) -> int:
    """Every observer's polls as one table, ``observers/observations.parquet`` (observer, seq: the
    record's place in the observer's reads, poll, time, topic, partition, offset, crc): what both
    engines read. Returns the row count."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns: dict[str, list[Any]] = {k: [] for k in ("observer", "seq", "poll", "time", "topic", "partition", "offset",
                                                     "crc")}
    for path in sorted(directory.glob("o*.jsonl")):
        header, polls, _ = read_observer_log(path)
        topics = header.get("topics") or []
        observer = header.get("observer", int(path.stem[1:]))
        seq = 0
        for poll in polls:
            for topic_index, partition, offset, crc in poll["r"]:
                columns["observer"].append(observer)
                columns["seq"].append(seq)
                seq += 1
                columns["poll"].append(poll["poll"])
                columns["time"].append(poll["t"])
                columns["topic"].append(topics[topic_index])
                columns["partition"].append(partition)
                columns["offset"].append(offset)
                columns["crc"].append(crc)
    schema = pa.schema([("observer", pa.int32()), ("seq", pa.int64()), ("poll", pa.int64()), ("time", pa.float64()),
                        ("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()),
                        ("crc", pa.int64())])
    pq.write_table(pa.table(columns, schema=schema), directory / OBSERVATIONS)
    return len(columns["offset"])
