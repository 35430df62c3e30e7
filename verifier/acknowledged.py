"""The input side's ground truth: what the seeder's transactions were acknowledged to have written.

The seeder records, per transaction it ended for certain, every input the broker acknowledged
(``[id, partition, offset]``) and whether the transaction committed or aborted
(workloads/seeder.py). That is what the input log must hold (each committed input, at its
position, with its id) and what no read_committed reader may ever see (each aborted one). The
final input log and the pipeline read the topic the same way, so they agree with each other
even when the log lost or exposed a record; only the acknowledgements tell. A batch whose
outcome the seeder did not learn (``info``) says nothing and is left out.

Runs recorded before the seeder kept its acknowledgements have each batch's index range only:
their committed ids are named from it (``workloads.lineage.input_id``, the seeded naming
contract), positions unknown, so those inputs are checked by id.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from kchaos.verifier.checks import explain
from kchaos.workloads.lineage import input_id


@dataclass
class Acknowledged:
    #: (partition, offset) -> input id, of the seeder's committed transactions
    committed: dict[tuple[int, int], str] = field(default_factory=dict)
    #: (partition, offset) -> input id, of the transactions it aborted (on purpose or after an error)
    aborted: dict[tuple[int, int], str] = field(default_factory=dict)
    #: ids of committed transactions whose positions were not recorded (older runs)
    committed_ids: set[str] = field(default_factory=set)
    #: ids of batches whose outcome the seeder did not learn: they may be committed twice
    unknown_ids: set[str] = field(default_factory=set)
    #: seed operations that ended for certain, and how many of them recorded their inputs
    batches: int = 0
    recorded: int = 0
    #: per seed operation (its op) that ended unknown, the ids of its range: all that names its writes
    unknown_batches: dict[int, set[str]] = field(default_factory=dict)
    #: per seed operation whose commit failed (then aborted), the positions it was acknowledged
    failed_batches: dict[int, dict[tuple[int, int], str]] = field(default_factory=dict)

    @property
    def any(self) -> bool:
        return bool(self.committed or self.committed_ids or self.aborted)

    def ids_committed(self) -> set[str]:
        return set(self.committed.values()) | self.committed_ids


def acknowledged_inputs(ops: list[dict[str, Any]], seed: int | None) -> Acknowledged:
    """The seeder's acknowledgements from the paired history (``seed``: the run's, which names
    the inputs of batches recorded without their acknowledgements)."""
    out = Acknowledged()
    for op in ops:
        if op["process"] != "seeder" or op["f"] != "seed":
            continue
        value = op["value"]
        named = [] if seed is None or "first" not in value else [input_id(seed, i)
                                                                  for i in range(value["first"], value["last"] + 1)]
        if op["outcome"] not in ("ok", "fail"):
            out.unknown_ids.update(named)
            out.unknown_batches[op["op"]] = set(named)
            continue
        out.batches += 1
        aborted = bool(value.get("aborted")) or op["outcome"] == "fail"
        inputs = value.get("inputs")
        if inputs is None:
            if not aborted:
                out.committed_ids.update(named)
            continue
        out.recorded += 1
        target = out.aborted if aborted else out.committed
        for in_id, p, o in inputs:
            target[(int(p), int(o))] = in_id
        if op["outcome"] == "fail":
            out.failed_batches[op["op"]] = {(int(p), int(o)): in_id for in_id, p, o in inputs}
    return out


def doubtful_ids(ack: Acknowledged, ops: Iterable[int]) -> set[str]:
    """The input ids that name the writes of these doubtful seed operations (:func:`visible_batches`)."""
    out: set[str] = set()
    for op in ops:
        out |= ack.unknown_batches.get(op, set()) | set(ack.failed_batches.get(op, {}).values())
    return out


def visible_batches(ack: Acknowledged, ops: Iterable[int], copies: Iterable[tuple[int, int, str]]) -> set[int]:
    """Of the seed operations ``ops`` whose commit the seeder saw fail or never learned the end of,
    those whose writes the committed input log holds; ``copies``: its records (partition, offset,
    id) of the ids :func:`doubtful_ids` names. A failed commit's writes are its acknowledged
    positions. An unknown one's are known by id only, and the next batch writes the same ids again:
    a copy is its only at a position no committed batch was acknowledged at (for a run recorded
    before positions, a copy beyond the one its committed batch made). One definition for both
    engines, each of which reads the copies from its own input view."""
    held: dict[str, list[tuple[int, int]]] = {}
    for p, o, i in copies:
        held.setdefault(i, []).append((int(p), int(o)))
    out = set()
    for op in ops:
        if op in ack.failed_batches:
            shown = any(pos in held.get(i, ()) for pos, i in ack.failed_batches[op].items())
        else:
            shown = any(len([pos for pos in held.get(i, ()) if pos not in ack.committed]) > (i in ack.committed_ids)
                        for i in ack.unknown_batches.get(op, ()))
        if shown:
            out.add(op)
    return out


def seeder_count_cases(final: dict[str, Any], input_log_count: int, topic: str) -> list[dict[str, Any]]:
    """The seeder's own count of the inputs it committed (``final.json``), against the committed
    input log: fewer records there than the seeder committed is a loss, whatever its history
    recorded (an input the seeder wrote again after an unknown outcome can only add records)."""
    committed = (final.get("seeder") or {}).get("committed")
    if committed is None or input_log_count >= committed:
        return []
    return [{"explanation": explain("lost-acknowledged-input.count", n=committed, m=input_log_count, topic=topic),
             "seeder": final.get("seeder"), "input_log_records": input_log_count}]
