"""The lineage contract: what every output record carries so that a verifier can trace it.

An output record's **key** is the input id (UTF-8). Its **value** is a JSON object:

| field | meaning |
| --- | --- |
| ``in_id`` | the input record's unique id (the input key) |
| ``in_topic``, ``in_partition``, ``in_offset`` | where the input was read |
| ``slot``, ``slots`` | this output is slot ``j`` of ``K`` outputs made from the input |
| ``worker`` | the worker slot that wrote it (``w0``, ``w1`` ...) |
| ``incarnation`` | the worker process's incarnation (restarts and replacements count up) |
| ``txid`` | the producer's ``transactional.id`` (null when not transactional) |
| ``txn_seq`` | the writing process's transaction sequence number (1, 2, ...), unique per (worker, incarnation) |

Slot ``j`` goes to output topic ``j % T``. Any application that writes these fields can be
verified by kchaos (docs/workload.md, "Bring your own pipeline").
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Lineage:
    in_id: str
    in_topic: str
    in_partition: int
    in_offset: int
    slot: int
    slots: int
    worker: str
    incarnation: int
    txid: str | None
    txn_seq: int

    def encode(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode()

    @classmethod
    def decode(cls, value: bytes) -> "Lineage":
        data = json.loads(value)
        return cls(**{k: data.get(k) for k in cls.__dataclass_fields__})


def input_id(seed: int, index: int) -> str:
    """Unique, seeded id of the ``index``-th input record."""
    import hashlib

    digest = hashlib.blake2b(f"{seed}:{index}".encode(), digest_size=6).hexdigest()
    return f"in-{index:09d}-{digest}"


def input_value(seed: int, index: int) -> bytes:
    return json.dumps({"id": input_id(seed, index), "n": index}, separators=(",", ":")).encode()
