"""The run directory read into memory (``RunData``), for the single-process reference engine
(verifier/pychecker.py) and for the driver-side share ledger (verifier/share_checks.py), which
the Spark engine runs too: the dumped topics (read in batches, outputs held as compact
``model.Output`` records), the final state, the history, the decoded internal topics, and the
evidence a case cites."""

from __future__ import annotations

import functools
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Iterator

from kchaos.verifier import driver_checks, evidence
from kchaos.verifier.acknowledged import acknowledged_inputs, doubtful_ids, visible_batches
from kchaos.verifier.campaign import load_recorded
from kchaos.verifier.coordinator_log import CoordinatorTxn, coordinator_records, coordinator_transactions
from kchaos.verifier.internal_topics import decoded_txn_log, offset_commit_batches
from kchaos.verifier.late_requests import late_requests, read_message_events
from kchaos.verifier.segments import Segments, run_segments
from kchaos.verifier.model import (HistoryIndex, LINEAGE_FIELDS, Output, identity_positions, read_ops, run_seed)
from kchaos.verifier.observations import ObservedRun, observer_summary
from kchaos.workloads.lineage import IdLocator


def _read_topic(run: Path, topic: str, view: str) -> Iterator[dict[str, Any]]:
    """The dumped topic's records, read in batches (never the whole table as Python objects)."""
    import pyarrow.parquet as pq

    path = run / "topics" / f"{topic}.{view}.parquet"
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: the run's final reads did not complete")
    for batch in pq.ParquetFile(path).iter_batches(batch_size=65536):
        yield from batch.to_pylist()


#: an identity-lineage output whose input id was committed twice: set aside, never guessed
SET_ASIDE = object()


def _identity(record: dict[str, Any], topic: str, slot: int, locator: IdLocator,
              where: dict[str, tuple[int, int]], workload: dict[str, Any], ambiguous: set[str]) -> Any:
    """Identity lineage: the lineage an output carrying only its input's id stands for (slot: its
    topic's index; no transaction named), SET_ASIDE when its id is ambiguous, or None when its id
    names no known input."""
    in_id = locator.extract(record["key"], record["value"])
    pos = where.get(in_id) if in_id is not None else None
    if pos is None:
        return SET_ASIDE if in_id in ambiguous else None
    return Output({"topic": topic, "partition": record["partition"], "offset": record["offset"], "in_id": in_id,
                   "in_topic": workload.input_topic, "in_partition": pos[0], "in_offset": pos[1], "slot": slot,
                   "slots": workload.outputs_per_input})


_SHARED_STRINGS = ("in_topic", "worker", "txid")


def _lineage(record: dict[str, Any], topic: str, numbers: dict[int, int]) -> Output | None:
    """The record's lineage fields, or None when it does not follow the lineage contract. The
    strings repeated across records (topic, worker, transactional.id) and transaction numbers are
    shared, not one copy per record (``numbers``: the run's table of them)."""
    try:
        value = json.loads(record["value"])
    except (TypeError, ValueError):
        return None
    if not isinstance(value, dict) or any(f not in value for f in LINEAGE_FIELDS):
        return None
    for name in _SHARED_STRINGS:
        if type(value.get(name)) is str:
            value[name] = sys.intern(value[name])
    if type(value["txn_seq"]) is int:
        value["txn_seq"] = numbers.setdefault(value["txn_seq"], value["txn_seq"])
    value.update(topic=topic, partition=record["partition"], offset=record["offset"])
    return Output(value)


class RunData:
    def __init__(self, run: Path, ops: list[dict[str, Any]] | None = None):
        self.run = run
        campaign = self.campaign = load_recorded(run)
        self.workload = campaign.workload
        final = self.final = json.loads((run / "final.json").read_text())
        self.final_offsets = {int(p): o for p, o in (final.get("group_offsets") or {}).items()}
        input_topic = self.workload.input_topic
        self.inputs_committed = {(r["partition"], r["offset"]): r["key"].decode() for r in
                                 _read_topic(run, input_topic, "committed")}
        #: inputs in the raw view that are not committed (aborted or undecided input transactions)
        self.inputs_raw_only = {(r["partition"], r["offset"]): r["key"].decode() for r in
                                _read_topic(run, input_topic, "raw")
                                if (r["partition"], r["offset"]) not in self.inputs_committed}
        locator = IdLocator.parse(self.workload.lineage_id) if self.workload.lineage == "id" else None
        #: identity lineage: inputs whose id was committed twice, set aside (model.identity_positions)
        self.ambiguous_inputs = 0
        #: the committed input log as read (identity lineage sets ambiguous ids aside from
        #: inputs_committed; what the seeder acknowledged is checked against all of it)
        self.input_log = self.inputs_committed
        where: dict[str, tuple[int, int]] = {}
        ambiguous: set[str] = set()
        if locator is not None:
            # the raw-only inputs are all identity_positions needs of the raw view: an id at a
            # position both views hold is a committed id
            where, ambiguous = identity_positions(self.inputs_committed, self.inputs_raw_only)
            self.ambiguous_inputs = sum(1 for i in self.inputs_committed.values() if i in ambiguous)
            self.input_log = dict(self.inputs_committed)
            self.inputs_committed = {k: v for k, v in self.inputs_committed.items() if v not in ambiguous}
            self.inputs_raw_only = {k: v for k, v in self.inputs_raw_only.items() if v not in ambiguous}
        numbers: dict[int, int] = {}

        def outputs(view: str) -> Iterator[Output | None]:
            for slot, topic in enumerate(self.workload.output_topics):
                for r in _read_topic(run, topic, view):
                    yield (_lineage(r, topic, numbers) if locator is None
                           else _identity(r, topic, slot, locator, where, self.workload, ambiguous))

        self._outputs = outputs
        self.outputs_committed: list[Output] = []
        #: output records without the lineage fields: counted, reported in facts, never guessed at
        self.foreign_outputs: dict[str, int] = {"committed": 0, "raw": 0}
        #: of those, identity-lineage outputs of an input id committed twice (set aside on purpose)
        self.set_aside_outputs = 0
        for out in outputs("committed"):
            if out is None or out is SET_ASIDE:
                self.foreign_outputs["committed"] += 1
                self.set_aside_outputs += out is SET_ASIDE
            else:
                self.outputs_committed.append(out)
        #: the raw view as counts: outputs per transaction (process, txn_seq), and in all
        self.raw_per_txn: Counter[tuple[str, int]] = Counter()
        self.outputs_raw = 0
        for out in outputs("raw"):
            if out is None or out is SET_ASIDE:
                self.foreign_outputs["raw"] += 1
            else:
                self.outputs_raw += 1
                self.raw_per_txn[self.txn_key(out)] += 1
        self.liveness = final.get("liveness")
        self.txn_log = self.decoded_txn_log(run)
        self.offset_log = self._decoded_offsets(run)
        self.history = HistoryIndex(read_ops(run) if ops is None else ops)
        h = self.history
        self.ops, self.faults, self.txid_prefix, self.has_history = h.ops, h.faults, h.txid_prefix, h.has_history
        self.txn_ops, self.txn_outcome, self.input_ops = h.txn_ops, h.txn_outcome, h.input_ops
        self.unexplained: list[tuple[tuple[int, int], str]] | None = None
        self.slots: dict[tuple[int, int], Any] | None = None
        self.duplicates: dict[tuple[int, int, int], int] | None = None
        # what the evidence rules (verifier/evidence.py) and the white-box checks read
        self.compaction = evidence.compaction_of(run, final)
        self.observer_summary = observer_summary(run, final)
        self._coordinator_txns: list[CoordinatorTxn] | None = None
        self._observed: ObservedRun | None = None
        self.acknowledged = acknowledged_inputs(h.ops, run_seed(run, campaign))
        self.txn_log_records = len(self.txn_log) if self.txn_log is not None else None
        self.foreign_committed = self.foreign_outputs["committed"] - self.set_aside_outputs
        self.outputs_committed_count = len(self.outputs_committed)
        self.inputs_committed_count = len(self.inputs_committed)
        self.output_processes = ({self.txn_key(o)[0] for o in self.outputs_committed if o["worker"]}
                                 if locator is None else None)
        self.coordinator_facts: dict[str, Any] | None = None
        self.producer_id_facts: dict[str, Any] | None = None  # producer ids and epochs (invalid-txn-transition)

    def coordinator_transactions(self) -> list[CoordinatorTxn]:
        """The decoded log segmented into coordinator transactions (verifier/coordinator_log.py), once."""
        if self._coordinator_txns is None:
            self._coordinator_txns = coordinator_transactions(coordinator_records(self.txn_log or []))
        return self._coordinator_txns

    def coordinator_aborted(self) -> dict[tuple[str, int], str]:
        """Client transactions the coordinator's log shows aborted, with the kind of aborted read
        their visible outputs are (driver_checks.coordinator_aborted_kinds)."""
        return driver_checks.coordinator_aborted_kinds(self) if self.txn_log else {}

    def coordinator_committed(self) -> set[tuple[str, int]]:
        """Client transactions the coordinator's log shows committed that their client did not see commit."""
        return driver_checks.coordinator_committed_keys(self) if self.txn_log else set()

    def visible_transactions(self, keys: set[tuple[str, int]]) -> set[tuple[str, int]]:
        """Of these client transactions, those with a committed output; of the seeder's, those whose
        inputs the committed input log holds (acknowledged.visible_batches)."""
        visible = {k for k in (self.txn_key(o) for o in self.outputs_committed) if k in keys} if keys else set()
        seeded = [op for process, op in keys if (process, op) in self.history.seeder_txns]
        if seeded:
            wanted = doubtful_ids(self.acknowledged, seeded)
            copies = [(p, o, i) for (p, o), i in self.input_log.items() if i in wanted]
            visible |= {("seeder", op) for op in visible_batches(self.acknowledged, seeded, copies)}
        return visible

    def latest_txn_records_below(self, bounds: dict[int | None, int | None],
                                 txids: set[str]) -> dict[str, dict[str, Any]]:
        """Per transactional id of ``txids``, its ``__transaction_state`` record with the highest
        offset below its partition's bound in ``bounds`` (a bound None: none; the key None: every
        partition not named; a partition not named otherwise: nothing read): partition, offset,
        status (a tombstone's: None) and last_update_ms."""
        out: dict[str, dict[str, Any]] = {}
        for r in self.txn_log or []:
            e, partition = r["entry"], r["partition"]
            if (partition not in bounds and None not in bounds) or e.transactional_id not in txids:
                continue
            bound = bounds[partition] if partition in bounds else bounds[None]
            if bound is not None and r["offset"] >= bound:
                continue
            known = out.get(e.transactional_id)
            if known is None or r["offset"] > known["offset"]:
                out[e.transactional_id] = {"partition": partition, "offset": r["offset"],
                                           "status": e.status if e.producer_id is not None else None,
                                           "last_update_ms": e.last_update_ms if e.producer_id is not None else None}
        return out

    @property
    def unrecorded_output_transactions(self) -> dict[str, list[int]] | None:
        """Per process, the transactions its committed outputs name that its history holds no
        ``send`` of (full lineage; None for identity lineage, whose outputs name none)."""
        if self.output_processes is None:
            return None
        missing: dict[str, set[int]] = defaultdict(set)
        for o in self.outputs_committed:
            if o["worker"]:
                key = self.txn_key(o)
                if key not in self.txn_ops:
                    missing[key[0]].add(key[1])
        return {p: sorted(seqs) for p, seqs in sorted(missing.items())}

    @functools.cached_property
    def segments(self) -> Segments | None:
        """The brokers' own batches, merged across replicas, and what was not read (segments.py), read once."""
        return run_segments(self.run)

    def late_requests(self) -> list[dict[str, Any]] | None:
        """The message proxy's late or duplicated requests, with what the coordinator wrote after them."""
        events = read_message_events(self.run)
        return late_requests(events, self.txn_log, self.ops) if events else None

    def raw_outputs_of(self, txns: set[tuple[str, int]]) -> dict[tuple[str, int], list[Output]]:
        """The raw view's outputs of these transactions, in record order (read again: only the
        cases found cite them)."""
        found: dict[tuple[str, int], list[Output]] = defaultdict(list)
        if txns:
            for out in self._outputs("raw"):
                if isinstance(out, Output) and self.txn_key(out) in txns:
                    found[self.txn_key(out)].append(out)
        return found

    decoded_txn_log = staticmethod(decoded_txn_log)

    def _decoded_offsets(self, run: Path) -> list[dict[str, Any]] | None:
        """The group's committed offset commits, in log order (committed view: aborted
        transactional offset commits excluded), or None."""
        import pyarrow.parquet as pq

        path = run / "topics" / "__consumer_offsets.committed.parquet"
        if not path.exists():
            return None
        commits = offset_commit_batches(pq.ParquetFile(path).iter_batches(), self.workload.group_id,
                                        self.workload.input_topic)
        return sorted((r for batch in commits for r in batch.to_pylist()),
                      key=lambda r: (r["log_partition"], r["log_offset"]))

    def txn_key(self, out: dict[str, Any]) -> tuple[str, int]:
        return (f"{out['worker']}.{out['incarnation']}", out["txn_seq"])

    def faults_at(self, t: float | None) -> list[dict[str, Any]]:
        return self.history.faults_at(t)

    @property
    def observed(self) -> ObservedRun:
        """The observers' reads and the final log's positions (read once, for every read-side check)."""
        if self._observed is None:
            self._observed = ObservedRun(self.run, self.campaign.observers.isolation,
                                         [self.workload.input_topic, *self.workload.output_topics])
        return self._observed

    def txn_evidence(self, key: tuple[str, int]) -> dict[str, Any]:
        return self.history.txn_evidence(key)
