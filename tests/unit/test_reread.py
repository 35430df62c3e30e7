"""A duplicate read again because its consumer fetched a committed offset while an earlier
transaction's offset commit was pending (checks.reread_evidence, HistoryIndex.assigned_during_commit;
docs/findings.md F20: aiokafka has no KIP-447 require_stable)."""

from __future__ import annotations

from typing import Any

from kchaos.verifier.checks import reread_evidence
from kchaos.verifier.model import HistoryIndex
from kchaos.workloads.history import pair_operations


def test_a_member_assigned_a_partition_while_another_commits_it_reads_it_again():
    """reread across members: w2 is assigned partition 1 while w1's transaction 7 is committing its
    offset 40 there; w2's transaction 3 processes 36-39 again (its fetch read the offset before
    7's pending commit). An assignment before 7 began sending its offsets says nothing."""
    def history(assign_first: bool) -> HistoryIndex:
        lines, clock = [], 0.0
        ops = {"w1.1": 0, "w2.1": 0}

        def add(process: str, f: str, value: dict[str, Any]) -> None:
            nonlocal clock
            ops[process] += 1
            clock += 1.0
            base = {"process": process, "op": ops[process], "f": f, "txid": f"run-{process[:2]}", "pid": 1, "epoch": 0}
            lines.append({**base, "time": clock, "type": "invoke", "value": value})
            lines.append({**base, "time": clock + 0.1, "type": "ok", "value": value})

        add("w1.1", "send", {"txn_seq": 7, "inputs": [[1, o] for o in range(36, 40)]})
        if assign_first:
            add("w2.1", "assign", {"partitions": [1]})
        add("w1.1", "send_offsets", {"txn_seq": 7, "offsets": {"1": 40}})
        if not assign_first:
            add("w2.1", "assign", {"partitions": [1]})
        add("w1.1", "commit", {"txn_seq": 7, "offsets": {"1": 40}})
        add("w2.1", "send", {"txn_seq": 3, "inputs": [[1, o] for o in range(36, 40)]})
        add("w2.1", "send_offsets", {"txn_seq": 3, "offsets": {"1": 40}})
        add("w2.1", "commit", {"txn_seq": 3, "offsets": {"1": 40}})
        return HistoryIndex(pair_operations(lines))

    records = [{"worker": "w1", "incarnation": 1, "txn_seq": 7}, {"worker": "w2", "incarnation": 1, "txn_seq": 3}]
    got = reread_evidence(history(False), 1, records)["reread"]
    assert (got["process"], got["txn_seq"], got["assigned"]) == ("w1.1", 7, "w2.1")
    assert reread_evidence(history(True), 1, records) == {}
    assert reread_evidence(history(False), 0, records) == {}  # another partition
