"""Kafka's internal topics as Arrow record batches: the project's decoders (kchaos/protocol/decoders.py)
applied batch by batch, for Spark's ``mapInArrow`` (the executors decode what they read, so no
single process holds a large cluster's transaction or offset log).

A module of its own, not the Spark job's: the job runs as ``__main__``, and functions pickled
from there would reach the executors by value, without the module's other names.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any, Iterator

from kchaos.protocol.decoders import OffsetCommit, decode_offsets_record, decode_transaction_record
from kchaos.verifier.coordinator_log import COORDINATOR_TXN_SCHEMA, coordinator_transactions

TXN_LOG_SCHEMA = ("partition INT, offset BIGINT, transactional_id STRING, producer_id BIGINT, producer_epoch INT, "
                  "status STRING, partitions STRING, last_update_ms BIGINT, start_ms BIGINT, timeout_ms INT, "
                  "client_transaction_version INT")
OFFSET_COMMIT_SCHEMA = "log_partition INT, log_offset BIGINT, partition INT, offset BIGINT, commit_timestamp BIGINT"



def transaction_log_batches(batches: Iterator[Any]) -> Iterator[Any]:
    """``__transaction_state`` records (partition, offset, key, value) -> one row per decoded
    record (TXN_LOG_SCHEMA; a tombstone has no producer id); records of other types dropped."""
    import pyarrow as pa


    for batch in batches:
        rows: dict[str, list[Any]] = {k: [] for k in ("partition", "offset", "transactional_id", "producer_id",
                                                      "producer_epoch", "status", "partitions", "last_update_ms",
                                                      "start_ms", "timeout_ms", "client_transaction_version")}
        for r in batch.to_pylist():
            e = decode_transaction_record(r["key"], r["value"])
            if e is None:
                continue
            for k, v in (("partition", r["partition"]), ("offset", r["offset"]), ("transactional_id", e.transactional_id),
                         ("producer_id", e.producer_id), ("producer_epoch", e.producer_epoch), ("status", e.status),
                         ("partitions", json.dumps(e.partitions)), ("last_update_ms", e.last_update_ms),
                         ("start_ms", e.start_ms), ("timeout_ms", e.timeout_ms),
                         ("client_transaction_version", e.client_transaction_version)):
                rows[k].append(v)
        yield pa.RecordBatch.from_pydict(rows, schema=_arrow_schema(TXN_LOG_SCHEMA))


def offset_commit_batches(batches: Iterator[Any], group: str | None, topic: str) -> Iterator[Any]:
    """``__consumer_offsets`` records -> the offset commits of ``group`` for ``topic``
    (OFFSET_COMMIT_SCHEMA); group metadata and tombstones dropped. Both engines count commits
    by this one definition."""
    import pyarrow as pa


    for batch in batches:
        rows: dict[str, list[Any]] = {k: [] for k in ("log_partition", "log_offset", "partition", "offset",
                                                      "commit_timestamp")}
        for r in batch.to_pylist():
            c = decode_offsets_record(r["key"], r["value"])
            if isinstance(c, OffsetCommit) and c.group == group and c.topic == topic and c.offset is not None:
                for k, v in (("log_partition", r["partition"]), ("log_offset", r["offset"]), ("partition", c.partition),
                             ("offset", c.offset), ("commit_timestamp", c.commit_timestamp)):
                    rows[k].append(v)
        yield pa.RecordBatch.from_pydict(rows, schema=_arrow_schema(OFFSET_COMMIT_SCHEMA))


@functools.cache
def _arrow_schema(ddl: str) -> Any:
    import pyarrow as pa

    types = {"INT": pa.int32(), "BIGINT": pa.int64(), "STRING": pa.string()}
    return pa.schema([(name, types[kind]) for name, kind in (col.split() for col in ddl.split(", "))])


def coordinator_transactions_of(frame: Any) -> Any:
    """One transactional id's decoded records (a pandas frame of TXN_LOG_SCHEMA) -> its
    coordinator transactions (coordinator_log.COORDINATOR_TXN_SCHEMA): Spark's ``applyInPandas``
    runs coordinator_log.coordinator_transactions on the executors, one id at a time."""
    import pandas as pd


    columns = [col.split()[0] for col in COORDINATOR_TXN_SCHEMA.split(", ")]
    records = []
    for r in frame.to_dict("records"):
        # pandas' numbers back to Python's; a null (a tombstone's fields) as None
        r = {k: None if v is None or (isinstance(v, float) and v != v) else (v.item() if hasattr(v, "item") else v)
             for k, v in r.items()}
        r["partitions"] = json.loads(r["partitions"]) if isinstance(r["partitions"], str) else {}
        records.append(r)
    return pd.DataFrame([ct.row() for ct in coordinator_transactions(records)], columns=columns, dtype=object)


def decoded_txn_log(run: Path) -> list[dict[str, Any]] | None:
    """Decoded __transaction_state records in log order (partition, offset), or None."""
    import pyarrow.parquet as pq

    path = run / "topics" / "__transaction_state.raw.parquet"
    if not path.exists():
        return None
    out = []
    for r in sorted(pq.read_table(path).to_pylist(), key=lambda r: (r["partition"], r["offset"])):
        entry = decode_transaction_record(r["key"], r["value"])
        if entry is not None:
            out.append({"partition": r["partition"], "offset": r["offset"], "entry": entry})
    return out
