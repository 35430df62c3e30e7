"""Generated run directories for the verifier's property-based and differential tests.

A *world* is a small consume-transform-produce run told from its ground truth: input partitions
read in order by transactions of a few workers; each transaction commits, aborts (its inputs are
then processed again), or ends with an unknown outcome (``info``: the coordinator may have
committed or aborted it; both happen here). From that follow the output topics in both views,
the client history, the coordinator's ``__transaction_state`` (the whole state machine: fences,
``PrepareEpochFence``, expiry to ``Dead`` and tombstones), the group's final offsets and the
liveness snapshot. A clean world is valid by construction.

The evidence is complete, as a real run's: the coordinator's records carry each transaction's
partitions and times on the history's clock (an Ongoing 1 ms after the client's send, the
Prepare 1 ms after it asked to end the transaction), every commit's offsets are in
``__consumer_offsets``, the seeder's history records each input it was acknowledged to commit or
abort, and ``final.json`` says nothing was compacted.

A *mutation* then injects one anomaly of the taxonomy into the stored run (``MUTATIONS``: name ->
the anomaly a checker must name); some also cause others (a lost output is a torn transaction
too), so tests ask for the injected one to be named, not for it alone.

Hypothesis draws the shape (partitions, inputs, K, workers, delivery, mutation) and a seed for
the rest, so a failing example is a run directory: ``keep_failing_run`` copies it where it can
be re-checked with ``kchaos analyze``.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from tests.unit.test_checkers import _offset_record, _sent_ms, _txn_record, _write_topic

#: injected anomaly -> the anomaly a checker must name for it
MUTATIONS = {
    "duplicate": "duplicate",
    "lost-write": "lost-write",
    "lost-input": "lost-input",
    "torn-transaction": "torn-transaction",
    "aborted-read": "aborted-read",
    "aborted-input-read": "aborted-read",
    "offsets-ahead": "offsets-ahead",
    "offsets-behind": "offsets-behind",
    "nonmonotonic": "nonmonotonic",
    "txn-transition-out-of-dead": "invalid-txn-transition",
    "txn-transition-skipping-prepare": "invalid-txn-transition",
    "txn-epoch-backwards": "invalid-txn-transition",
    "zombie-write": "zombie-write",
    "hanging-transaction": "hanging-transaction",
    # white box: the coordinator's log, the offsets log, the seeder's acknowledgements
    "split-transaction": "split-transaction",
    "txn-ended-early": "split-transaction",
    "lost-offset-commit": "lost-offset-commit",
    "offsets-backwards": "offsets-backwards",
    "stray-offset-commit": "stray-offset-commit",
    "lost-acknowledged-input": "lost-acknowledged-input",
    "input-replaced": "input-mismatch",
    "seeder-aborted-visible": "aborted-read",
    "failed-commit-visible": "aborted-read",
}
OUTPUT_TOPICS = ("a", "b")
#: anomalies only a client history can show (what the client saw commit, abort or initialise)
NEEDS_HISTORY = ("lost-write", "aborted-read", "zombie-write", "split-transaction", "txn-ended-early",
                 "lost-offset-commit", "stray-offset-commit", "failed-commit-visible")
#: a transaction's times after its send (ms): the coordinator's Ongoing, the client's end (commit
#: or abort invoked), the coordinator's Prepare and Complete
ONGOING_MS, END_MS, PREPARE_MS, COMPLETE_MS = 1, 7, 8, 9


@dataclass
class Txn:
    process: str
    seq: int
    txid: str
    pid: int
    epoch: int
    inputs: list[tuple[int, int]]
    client: str           # what the client saw: committed | aborted | unknown | commit-failed
    committed: bool       # what the coordinator did (the ground truth)
    outputs: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class World:
    partitions: int
    inputs_per_partition: list[int]
    k: int
    workers: int
    delivery: str
    seed: int
    mutation: str | None = None
    #: an external app: the client history has the seeder and nothing of the pipeline
    external: bool = False
    # built by generate()
    inputs: dict[int, list[tuple[int, str, bool]]] = field(default_factory=dict)  # p -> [(offset, id, committed)]
    txns: list[Txn] = field(default_factory=list)
    final_offsets: dict[int, int] = field(default_factory=dict)
    #: (txid, status, epoch, pid, partitions, update_ms, start_ms); pid -1: tombstone
    txn_log: list[tuple[Any, ...]] = field(default_factory=list)
    #: the group's offset commits in log order: (partition, offset)
    offset_commits: list[tuple[int, int]] = field(default_factory=list)
    #: positions the seeder was acknowledged to commit beyond the inputs (a mutation's)
    extra_acks: list[tuple[int, int, str]] = field(default_factory=list)
    liveness: dict[str, Any] = field(default_factory=lambda: {"stable": True, "waited_s": 0.1, "pinned": {}})
    #: history operations a mutation adds: (f, outcome, value, process, txid, epoch, time)
    extra_ops: list[tuple[str, str, dict[str, Any], str, str, int, float]] = field(default_factory=list)
    #: per output topic, its log in append order: [output, visible to read_committed]; both views
    #: are read from it, so a record has the same offset in each
    logs: dict[str, list[list[Any]]] = field(default_factory=dict)

    @property
    def expected(self) -> str | None:
        if not self.mutation:
            return None
        if self.external and self.mutation == "offsets-ahead":
            # without a history nobody can tell processed from skipped. A worker's history with
            # no transaction in it is still a history (its init and assignment are there): the
            # input it never sent is skipped, offsets-ahead (verifier/model.py, has_history)
            return "lost-input"
        return MUTATIONS[self.mutation]

    @property
    def workload(self) -> dict[str, Any]:
        return {"input_topic": "in", "output_topics": list(OUTPUT_TOPICS), "outputs_per_input": self.k,
                "delivery": self.delivery, "group_id": "g", **({"external_command": ["app"]} if self.external else {})}

    # ground truth ------------------------------------------------------------------------------

    def generate(self) -> "World":
        rng = random.Random(self.seed)
        for p in range(self.partitions):
            offsets, o = [], 0
            for i in range(self.inputs_per_partition[p]):
                if rng.random() < 0.15:  # an aborted seeder write: in the raw view only
                    offsets.append((o, f"x-{p}-{o}", False))
                    o += 1
                offsets.append((o, f"id-{p}-{o}", True))
                o += 1
            self.inputs[p] = offsets
        epochs = {w: 0 for w in range(self.workers)}  # a failed commit's abort bumps the producer epoch
        seqs = {w: 0 for w in range(self.workers)}
        for p in range(self.partitions):
            todo = [(o, i) for o, i, ok in self.inputs[p] if ok]
            while todo:
                w = rng.randrange(self.workers)
                batch = todo[:rng.randint(1, 3)]
                seqs[w] += 1
                roll = rng.random()
                client, committed = (("committed", True) if roll < 0.65 else ("aborted", False) if roll < 0.8 else
                                     ("unknown", rng.random() < 0.5) if roll < 0.92 else ("commit-failed", False))
                txn = Txn(f"w{w}.1", seqs[w], f"tx-w{w}", 1000 + w, epochs[w], [(p, o) for o, _ in batch], client,
                          committed)
                for o, in_id in batch:
                    for slot in range(self.k):
                        txn.outputs.append({"in_id": in_id, "in_topic": "in", "in_partition": p, "in_offset": o,
                                            "slot": slot, "slots": self.k, "worker": f"w{w}", "incarnation": 1,
                                            "txid": txn.txid, "txn_seq": txn.seq, "_topic": OUTPUT_TOPICS[slot % 2],
                                            "_partition": p % 2})
                self.txns.append(txn)
                if committed:
                    todo = todo[len(batch):]
                if client == "commit-failed":
                    epochs[w] += 1
        self.final_offsets = {p: (self.inputs[p][-1][0] + 1 if self.inputs[p] else 0) for p in range(self.partitions)}
        self._transaction_log(rng)
        for t in self.txns:  # a committed transaction's offsets, in the order the group coordinator got them
            if t.committed:
                self.offset_commits += sorted(self.offsets_of(t).items())
        self.logs = {t: [] for t in OUTPUT_TOPICS}
        for t in self.txns:
            for out in t.outputs:
                self.logs[out["_topic"]].append([out, t.committed])
        return self

    def send_ms(self, txn: Txn) -> int:
        return round((100.0 + self.txns.index(txn) * 0.01) * 1000)

    def partitions_of(self, txn: Txn) -> dict[str, list[int]]:
        parts: dict[str, set[int]] = {"__consumer_offsets": {0}}
        for out in txn.outputs:
            parts.setdefault(out["_topic"], set()).add(out["_partition"])
        return {t: sorted(ps) for t, ps in parts.items()}

    @staticmethod
    def offsets_of(txn: Txn) -> dict[int, int]:
        out: dict[int, int] = {}
        for p, o in txn.inputs:
            out[p] = max(out.get(p, 0), o + 1)
        return out

    def _transaction_log(self, rng: random.Random) -> None:
        # the seeder's own transactions are in the log too; they are not the pipeline's progress
        self.txn_log += [("seeder-tx", "Empty", 0, 999, {}, 98000, -1),
                         ("seeder-tx", "Ongoing", 0, 999, {"in": [0]}, 98100, 98100),
                         ("seeder-tx", "PrepareCommit", 0, 999, {"in": [0]}, 98101, 98100),
                         ("seeder-tx", "CompleteCommit", 0, 999, {}, 98102, 98100)]
        for w in range(self.workers):
            txid, pid = f"tx-w{w}", 1000 + w
            mine = [t for t in self.txns if t.txid == txid]
            self.txn_log.append((txid, "Empty", 0, pid, {}, 99000 + w, -1))
            fenced = 0  # epochs the coordinator bumped on its own (fences): the log's epochs never go back
            last = 99000
            for t in mine:
                epoch, at, parts = t.epoch + fenced, self.send_ms(t), self.partitions_of(t)
                start = at + ONGOING_MS
                self.txn_log.append((txid, "Ongoing", epoch, pid, parts, start, start))
                prepare, complete = at + PREPARE_MS, at + COMPLETE_MS
                if t.committed:
                    self.txn_log += [(txid, "PrepareCommit", epoch, pid, parts, prepare, start),
                                     (txid, "CompleteCommit", epoch, pid, {}, complete, start)]
                elif rng.random() < 0.2:  # a fence (a new producer took the id over): the open one is aborted
                    fenced += 1
                    self.txn_log += [(txid, "PrepareEpochFence", epoch, pid, parts, prepare, start),
                                     (txid, "PrepareAbort", epoch + 1, pid, parts, prepare, start),
                                     (txid, "CompleteAbort", epoch + 1, pid, {}, complete, start)]
                else:
                    self.txn_log += [(txid, "PrepareAbort", epoch, pid, parts, prepare, start),
                                     (txid, "CompleteAbort", epoch, pid, {}, complete, start)]
                last = complete
            if rng.random() < 0.3:  # the id expired: Dead, then a tombstone
                self.txn_log += [(txid, "Dead", (mine[-1].epoch if mine else 0) + fenced, pid, {}, last + 1, -1),
                                 (txid, "", 0, -1, {}, last + 2, -1)]

    def _records_of(self, txn: Txn) -> list[int]:
        """Indexes in txn_log of ``txn``'s coordinator records (from its Ongoing to its Complete)."""
        at = self.send_ms(txn)
        return [i for i, r in enumerate(self.txn_log) if r[0] == txn.txid and at < r[5] <= at + COMPLETE_MS]

    def _entries(self, txn: Txn) -> list[list[Any]]:
        return [e for log in self.logs.values() for e in log if e[0]["worker"] + ".1" == txn.process
                and e[0]["txn_seq"] == txn.seq]

    # mutations ---------------------------------------------------------------------------------

    def mutate(self) -> bool:
        """Inject ``self.mutation``; False when this world has nothing to inject it into."""
        rng = random.Random(self.seed ^ 0x5EED)
        name = self.mutation
        ok = [t for t in self.txns if t.committed and t.client == "committed"]
        if name is None:
            return True
        if self.external and name in NEEDS_HISTORY:
            return False
        if name == "duplicate":  # an output written again, in a committed transaction
            committed = [t for t in self.txns if t.committed]
            if not committed:
                return False
            out = rng.choice(rng.choice(committed).outputs)
            self.logs[out["_topic"]].append([out, True])
        elif name in ("lost-write", "torn-transaction"):  # one output of a committed transaction hidden
            candidates = [t for t in ok if len(t.outputs) > 1] if name == "torn-transaction" else ok
            if not candidates:
                return False
            rng.choice(self._entries(rng.choice(candidates)))[1] = False
        elif name == "lost-input":  # every output of one input of a committed transaction hidden
            if not ok:
                return False
            t = rng.choice(ok)
            p, o = rng.choice(t.inputs)
            for entry in self._entries(t):
                if (entry[0]["in_partition"], entry[0]["in_offset"]) == (p, o):
                    entry[1] = False
        elif name == "aborted-read":  # an aborted transaction's outputs visible
            aborted = [t for t in self.txns if t.client == "aborted"]
            if not aborted:
                return False
            for entry in self._entries(rng.choice(aborted)):
                entry[1] = True
        elif name == "aborted-input-read":  # an output made from an aborted seeder write
            raw_only = [(p, o, i) for p, ins in self.inputs.items() for o, i, c in ins if not c]
            committed = [t for t in self.txns if t.committed]
            if not raw_only or not committed:
                return False
            p, o, in_id = rng.choice(raw_only)
            t = rng.choice(committed)
            self.logs["a"].append([{**t.outputs[0], "in_id": in_id, "in_partition": p, "in_offset": o, "slot": 0,
                                    "_topic": "a", "_partition": p % 2}, True])
        elif name == "offsets-ahead":  # the group's offset past an input nobody processed
            p = rng.randrange(self.partitions)
            o = self.final_offsets[p]
            self.inputs[p].append((o, f"id-{p}-{o}", True))
            self.final_offsets[p] = o + 1
        elif name == "offsets-behind":  # the group's offset left at an input whose outputs are committed
            done = sorted({(p, o) for t in self.txns if t.committed for p, o in t.inputs})
            if not done:
                return False
            p, o = rng.choice(done)
            self.final_offsets[p] = o
        elif name == "nonmonotonic":  # two visible outputs of one input partition swapped in their log
            for log in self.logs.values():
                pairs = [(i, j) for i in range(len(log)) for j in range(i + 1, len(log))
                         if log[i][1] and log[j][1] and log[i][0]["_partition"] == log[j][0]["_partition"]
                         and log[i][0]["in_partition"] == log[j][0]["in_partition"]
                         and log[i][0]["in_offset"] < log[j][0]["in_offset"]]
                if pairs:
                    i, j = rng.choice(pairs)
                    log[i], log[j] = log[j], log[i]
                    return True
            return False
        elif name == "txn-transition-out-of-dead":
            self.txn_log += [("tx-w0", "Dead", 9, 1000, {}, 200000, -1), ("tx-w0", "Ongoing", 9, 1000, {}, 200001, 200001)]
        elif name == "txn-transition-skipping-prepare":
            self.txn_log += [("tx-w0", "Ongoing", 9, 1000, {}, 200000, 200000),
                             ("tx-w0", "CompleteCommit", 9, 1000, {}, 200001, 200000)]
        elif name == "txn-epoch-backwards":
            self.txn_log += [("tx-w0", "Ongoing", 9, 1000, {}, 200000, 200000),
                             ("tx-w0", "PrepareAbort", 3, 1000, {}, 200001, 200000)]
        elif name == "split-transaction":  # a late abort ends its outputs' transaction; its offsets commit apart
            if not ok:
                return False
            t = rng.choice(ok)
            at, txid, epoch = self.send_ms(t), t.txid, self.txn_log[self._records_of(t)[0]][2]
            outputs = {k: v for k, v in self.partitions_of(t).items() if k != "__consumer_offsets"}
            offsets = {"__consumer_offsets": [0]}
            records = [(txid, "Ongoing", epoch, t.pid, outputs, at + 1, at + 1),
                       (txid, "PrepareAbort", epoch, t.pid, outputs, at + 2, at + 1),
                       (txid, "CompleteAbort", epoch, t.pid, {}, at + 3, at + 1),
                       (txid, "Ongoing", epoch, t.pid, offsets, at + 4, at + 4),
                       (txid, "PrepareCommit", epoch, t.pid, offsets, at + PREPARE_MS, at + 4),
                       (txid, "CompleteCommit", epoch, t.pid, {}, at + COMPLETE_MS, at + 4)]
            self._replace_records(t, records)
            for entry in self._entries(t):
                entry[1] = False
        elif name == "txn-ended-early":  # a late commit ends a transaction its client then aborts
            aborted = [t for t in self.txns if t.client == "aborted" and self._records_of(t)]
            if not aborted:
                return False
            t = rng.choice(aborted)
            at, parts = self.send_ms(t), self.partitions_of(t)
            epoch = self.txn_log[self._records_of(t)[0]][2]
            self._replace_records(t, [(t.txid, "Ongoing", epoch, t.pid, parts, at + 1, at + 1),
                                      (t.txid, "PrepareCommit", epoch, t.pid, parts, at + 3, at + 1),
                                      (t.txid, "CompleteCommit", epoch, t.pid, {}, at + 4, at + 1)])
            for entry in self._entries(t):
                entry[1] = True
        elif name == "lost-offset-commit":  # one committed transaction's offset commit gone
            with_offsets = [t for t in ok if self.offsets_of(t)]
            if not with_offsets:
                return False
            t = rng.choice(with_offsets)
            gone = next(iter(sorted(self.offsets_of(t).items())))
            self.offset_commits.remove(gone)
        elif name == "offsets-backwards":  # a commit below the one before it, hidden by the next
            if not self.offset_commits:
                return False
            i = rng.randrange(len(self.offset_commits))
            p, o = self.offset_commits[i]
            if o == 0:
                return False
            self.offset_commits.insert(i + 1, (p, o - 1))
        elif name == "stray-offset-commit":  # an aborted transaction's refused offsets, carried by a later commit
            sent = {(p, o) for t in self.txns if t.client != "aborted" for p, o in self.offsets_of(t).items()}
            picks = [(t, p, o) for t in self.txns if t.client == "aborted"
                     for p, o in sorted(self.offsets_of(t).items()) if (p, o) not in sent]
            if not picks:
                return False
            t, p, o = rng.choice(picks)
            at = 100.0 + self.txns.index(t) * 0.01 + 0.003  # between its send and its abort
            self.extra_ops.append(("send_offsets", "fail", {"txn_seq": t.seq, "offsets": {str(p): o}}, t.process,
                                   t.txid, t.epoch, at))
            self.offset_commits.append((p, o))
        elif name == "lost-acknowledged-input":  # acknowledged, then gone from the log: nobody consumed it
            p = rng.randrange(self.partitions)
            o = (self.inputs[p][-1][0] + 1) if self.inputs[p] else 0
            self.extra_acks.append((p, o, f"id-{p}-{o}"))
        elif name == "input-replaced":  # the input log holds another record where an output's input was
            done = sorted({(p, o) for t in self.txns if t.committed for p, o in t.inputs})
            if not done:
                return False
            p, o = rng.choice(done)
            self.inputs[p] = [(x, f"other-{p}-{x}" if x == o else i, c) for x, i, c in self.inputs[p]]
        elif name == "seeder-aborted-visible":  # an input the seeder aborted, read_committed sees it
            aborted = [(p, o) for p, ins in self.inputs.items() for o, _, c in ins if not c]
            if not aborted:
                return False
            self.exposed = [rng.choice(aborted)]
        elif name == "failed-commit-visible":  # a transaction whose commit the client saw fail, visible
            failed = [t for t in self.txns if t.client == "commit-failed" and t.outputs]
            if not failed:
                return False
            for entry in self._entries(rng.choice(failed)):
                entry[1] = True
        elif name == "zombie-write":
            committed = [t for t in ok if t.outputs]
            if not committed:
                return False
            t = rng.choice(committed)
            # another process initialised the same id, at a higher epoch, before t's commit was invoked
            self.extra_ops.append(("init", "ok", {}, f"z{t.process}", t.txid, t.epoch + 1, self._commit_time(t) - 0.001))
        elif name == "hanging-transaction":
            self.liveness = {"stable": False, "waited_s": 5.0, "pinned": {"a-0": {"lso": 0, "high": 3}}}
        else:
            raise ValueError(name)
        return True

    def _replace_records(self, txn: Txn, records: list[tuple[Any, ...]]) -> None:
        indexes = self._records_of(txn)
        at = indexes[0]
        for i in reversed(indexes):
            del self.txn_log[i]
        self.txn_log[at:at] = records

    # the run directory -------------------------------------------------------------------------

    def _commit_time(self, txn: Txn) -> float:
        return 100.0 + self.txns.index(txn) * 0.01 + END_MS / 1000

    def _history(self) -> list[dict[str, Any]]:
        committed = [[i, p, o] for p, ins in sorted(self.inputs.items()) for o, i, c in ins if c and (p, o) not in
                     self.exposed_set] + [[i, p, o] for p, o, i in self.extra_acks]
        aborted = [[i, p, o] for p, ins in sorted(self.inputs.items()) for o, i, c in ins if not c]
        ops: list[tuple[float, str, str, str, dict[str, Any], str, int, int]] = [
            (98.0, "seeder", "init", "ok", {}, "seeder-tx", 999, 0),
            (98.05, "seeder", "seed", "ok", {"aborted": True, "inputs": aborted}, "seeder-tx", 999, 0),
            (98.1, "seeder", "seed", "ok", {"count": len(committed), "inputs": committed}, "seeder-tx", 999, 0)]
        if self.external:
            return self._lines(ops)
        for w in range(self.workers):
            ops.append((99.0 + w * 0.001, f"w{w}.1", "init", "ok", {}, f"tx-w{w}", 1000 + w, 0))
        for i, t in enumerate(self.txns):
            at = 100.0 + i * 0.01
            ops.append((at, t.process, "send", "ok", {"txn_seq": t.seq, "inputs": [list(x) for x in t.inputs],
                                                      "outputs": len(t.outputs)}, t.txid, t.pid, t.epoch))
            end = at + END_MS / 1000
            if t.client == "aborted":
                ops.append((end, t.process, "abort", "ok", {"txn_seq": t.seq}, t.txid, t.pid, t.epoch))
            else:
                outcome = {"committed": "ok", "unknown": "info", "commit-failed": "fail"}[t.client]
                offsets = {str(p): o for p, o in self.offsets_of(t).items()}
                ops.append((end, t.process, "commit", outcome, {"txn_seq": t.seq, "offsets": offsets}, t.txid, t.pid,
                            t.epoch))
        for f, outcome, value, process, txid, epoch, at in self.extra_ops:
            ops.append((at, process, f, outcome, value, txid, 1000, epoch))
        return self._lines(ops)

    @staticmethod
    def _lines(ops: list[tuple[float, str, str, str, dict[str, Any], str, int, int]]) -> list[dict[str, Any]]:
        lines = []
        for op_id, (at, process, f, outcome, value, txid, pid, epoch) in enumerate(sorted(ops, key=lambda x: x[0])):
            for kind, t in (("invoke", at), (outcome, at + 0.0005)):
                lines.append({"time": t, "process": process, "op": op_id, "type": kind, "f": f, "value": value,
                              "txid": txid, "pid": pid, "epoch": epoch})
        return lines

    @property
    def exposed_set(self) -> set[tuple[int, int]]:
        return set(getattr(self, "exposed", []))

    def write(self, run: Path) -> Path:
        run.mkdir(parents=True, exist_ok=True)
        (run / "campaign.json").write_text(json.dumps({"workload": self.workload}))
        (run / "final.json").write_text(json.dumps({"group_offsets": {str(p): o for p, o in self.final_offsets.items()},
                                                    "drained": True, "liveness": self.liveness,
                                                    "compaction": {"__consumer_offsets": {}, "__transaction_state": {}},
                                                    "brokers_at_end": {"at": 0.0, "expected": [1], "registered": [1],
                                                                       "leaderless": []}}))
        log = []
        for i, (txid, status, epoch, pid, parts, update_ms, start_ms) in enumerate(self.txn_log):
            key, value = _txn_record(txid, status or "Empty", epoch, max(pid, 0), parts, update_ms, start_ms)
            log.append((0, i, key, None if pid < 0 else value))
        _write_topic(run, "__transaction_state", "raw", log)
        lines = self._history()
        offsets = [(0, i, *_offset_record("g", "in", p, o, _sent_ms(lines, p, o)))
                   for i, (p, o) in enumerate(self.offset_commits)]
        _write_topic(run, "__consumer_offsets", "committed", offsets)
        _write_topic(run, "__consumer_offsets", "raw", offsets)
        exposed = self.exposed_set
        for view, committed_only in (("committed", True), ("raw", False)):
            _write_topic(run, "in", view, [(p, o, i.encode(), b"{}") for p, ins in sorted(self.inputs.items())
                                           for o, i, c in ins if c or not committed_only or (p, o) in exposed])
        for topic in OUTPUT_TOPICS:
            raw, committed, next_offset = [], [], {}
            for out, visible in self.logs[topic]:
                part = out["_partition"]
                offset = next_offset.get(part, 0)
                next_offset[part] = offset + 1
                value = {k: v for k, v in out.items() if not k.startswith("_")}
                row = (part, offset, out["in_id"].encode(), json.dumps(value).encode())
                raw.append(row)
                if visible:
                    committed.append(row)
            _write_topic(run, topic, "committed", committed)
            _write_topic(run, topic, "raw", raw)
        (run / "history.jsonl").write_text("".join(json.dumps(line) + "\n" for line in self._history()))
        return run


@st.composite
def worlds(draw: Any, mutations: tuple[str | None, ...] = (None, *MUTATIONS)) -> World:
    """A generated world with one mutation (or none) that it can carry."""
    partitions = draw(st.integers(1, 3))
    world = World(partitions=partitions, inputs_per_partition=draw(st.lists(st.integers(0, 6), min_size=partitions,
                                                                              max_size=partitions)),
                  k=draw(st.integers(1, 2)), workers=draw(st.integers(1, 3)),
                  delivery="exactly-once",
                  seed=draw(st.integers(0, 2**31 - 1)), mutation=draw(st.sampled_from(mutations)),
                  external=draw(st.booleans())).generate()
    from hypothesis import assume

    assume(world.mutate())
    return world


def keep_failing_run(run: Path, label: str) -> Path:
    """Copy a run directory that made a test fail to ``$KCHAOS_KEEP_FAILED`` (default
    /tmp/kchaos-failed-runs) and return where, so it can be re-checked with ``kchaos analyze``."""
    root = Path(os.environ.get("KCHAOS_KEEP_FAILED", "/tmp/kchaos-failed-runs"))
    target = root / f"{label}-{os.getpid()}-{len(list(root.glob(label + '-*'))) if root.exists() else 0}"
    shutil.copytree(run, target)
    return target
