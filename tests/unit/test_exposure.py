"""Fault exposure (verifier/exposure.py) on hand-made histories: what each fault's window overlapped
of the pipeline's transactions, per fault and per kind, the stalls and what the workers were doing,
and what falls short of a campaign's requirement."""

from __future__ import annotations

from kchaos.faults.spec import ExposureSpec
from kchaos.verifier import exposure
from kchaos.verifier.model import HistoryIndex
from kchaos.workloads.history import pair_operations


class History:
    """Operations as (process, f, invoke time, completion time or None, outcome, value)."""

    def __init__(self) -> None:
        self.lines: list[dict] = []
        self._op = 0

    def op(self, process: str, f: str, start: float, end: float | None, outcome: str = "ok", error: str | None = None,
           **value) -> "History":
        self._op += 1
        base = {"process": process, "op": self._op, "f": f, "txid": f"tx-{process.split('.')[0]}"}
        self.lines.append({**base, "time": start, "type": "invoke", "value": value})
        if end is not None:
            self.lines.append({**base, "time": end, "type": outcome, "value": value,
                               **({"error": error} if error else {})})
        return self

    def txn(self, process: str, seq: int, start: float, end: float, outcome: str = "commit") -> "History":
        """A transaction: its send at ``start``, its commit (or abort, or a failed commit) ending at ``end``."""
        self.op(process, "send", start, start + 0.01, txn_seq=seq, inputs=[[0, seq]])
        self.op(process, "send_offsets", start + 0.02, start + 0.03, txn_seq=seq)
        if outcome == "commit":
            self.op(process, "commit", start + 0.04, end, txn_seq=seq)
        elif outcome == "commit-failed":
            self.op(process, "commit", start + 0.04, end, outcome="fail", txn_seq=seq)
        elif outcome == "abort":
            self.op(process, "abort", start + 0.04, end, txn_seq=seq)
        return self

    def fault(self, index: int, kind: str, start: float, end: float, outcome: str = "ok") -> "History":
        return self.op("harness", f"fault:{kind}", start, end, outcome, index=index, kind=kind, target="t")

    def phase(self, name: str, at: float) -> "History":
        return self.op("harness", "phase", at, at, phase=name)

    def index(self) -> HistoryIndex:
        return HistoryIndex(pair_operations(sorted(self.lines, key=lambda line: line["time"])))


def test_a_fault_window_counts_the_transactions_it_overlapped_by_outcome_and_the_requests_sent_in_it():
    h = History().phase("steady", 0.0)
    h.txn("w0.1", 1, 1.0, 2.0)                     # before the fault: not exposed
    h.txn("w0.1", 2, 9.0, 12.0)                    # in flight when the kill started, committed during it
    h.txn("w1.1", 1, 11.0, 11.5)                   # begun and committed inside it
    h.txn("w1.1", 2, 12.0, 16.0, "abort")          # begun inside, aborted after
    h.txn("w2.1", 1, 13.0, 14.0, "commit-failed")  # its commit failed
    h.txn("w2.1", 2, 30.0, 31.0)                   # long after
    h.fault(0, "kill", 10.0, 15.0)
    found = exposure.exposure(h.index(), stall_bound_s=100)
    (kill,) = found["faults"]
    assert (kill["in_flight_at_start"], kill["begun"], kill["committed"], kill["committed_in_window"],
            kill["aborted"], kill["commit_failed"]) == (1, 3, 2, 2, 1, 1)
    # the requests invoked inside [10, 15]: three sends and send_offsets, two commits (one failed), one abort;
    # the first transaction's commit went out before the kill
    assert kill["requests"] == {"produce": 3, "send_offsets": 3, "commit": 2, "abort": 1, "commit_offsets": 0}
    assert found["kinds"]["kill"]["committed"] == 2 and found["committed"] == 4
    assert found["committed_overlapping_a_fault"] == 2 and found["share_overlapping"] == 0.5


def test_a_transaction_under_two_windows_of_a_kind_counts_once_for_the_kind_and_a_failed_fault_counts_for_nothing():
    h = History().phase("steady", 0.0)
    h.txn("w0.1", 1, 9.0, 21.0)
    h.fault(0, "kill", 10.0, 11.0).fault(1, "kill", 20.0, 20.5).fault(2, "partition", 12.0, 13.0, outcome="fail")
    found = exposure.exposure(h.index(), stall_bound_s=100)
    assert [f["committed"] for f in found["faults"]] == [1, 1]
    assert found["kinds"]["kill"] == {**found["kinds"]["kill"], "faults": 2, "committed": 1, "transactions": 1}
    assert "partition" not in found["kinds"] and found["not_injected"] == [
        {"index": 2, "kind": "partition", "target": "t", "error": None}]


def test_a_transaction_that_never_ended_lives_until_its_process_last_acted():
    """A send, then nothing answered: its process's last record (a send_offsets that never came
    back) is where its life may end; a fault after that did not touch it."""
    h = History().phase("steady", 0.0)
    h.op("w0.1", "send", 1.0, 1.01, txn_seq=1)
    h.op("w0.1", "send_offsets", 1.02, None, txn_seq=1)
    h.op("w0.1", "poll", 5.0, 5.0)
    h.fault(0, "kill", 4.0, 4.5).fault(1, "kill", 6.0, 6.5)
    (txn,) = exposure.transactions(h.index())
    assert (txn.outcome, txn.began, txn.ended) == ("unknown", 1.0, 5.0)
    assert [f["unknown"] for f in exposure.exposure(h.index(), 100)["faults"]] == [1, 0]


def test_a_stall_is_a_span_without_commits_with_what_each_worker_was_doing_and_the_faults_over_it():
    h = History().phase("steady", 0.0)
    h.txn("w0.1", 1, 0.5, 1.0)
    h.op("w0.1", "send", 1.1, 1.11, txn_seq=2)
    h.op("w0.1", "send_offsets", 1.12, 14.0, outcome="fail", error="KafkaError{code=_TIMED_OUT}", txn_seq=2)
    h.op("w0.1", "abort", 14.0, 14.5, txn_seq=2)
    h.txn("w1.1", 1, 15.0, 15.2)
    h.txn("w1.1", 2, 15.3, 15.4)
    h.fault(0, "kill", 2.0, 6.0)
    found = exposure.stalls(h.index(), exposure.transactions(h.index()), 10.0, exposure.windows(h.index())[0])
    assert (found["count"], found["longest_s"]) == (1, 14.2)
    (stall,) = found["stalls"]
    assert (stall["from_s"], stall["to_s"], stall["faults"]) == (1.0, 15.2, ["0 kill:t"])
    longest = stall["workers"]["w0.1"][0]
    assert (longest["f"], longest["outcome"], longest["txn_seq"]) == ("send_offsets", "fail", 2)
    assert "_TIMED_OUT" in longest["error"]
    # the pipeline is done after its last commit: an idle tail is no stall unless the drain timed out
    h.phase("final-reads", 60.0)
    assert exposure.stalls(h.index(), exposure.transactions(h.index()), 10.0, [])["count"] == 1
    assert exposure.stalls(h.index(), exposure.transactions(h.index()), 10.0, [], drained=False)["count"] == 2


def test_the_shortfall_names_each_kind_and_the_share_that_fell_short():
    h = History().phase("steady", 0.0)
    for seq in range(10):
        h.txn("w0.1", seq + 1, seq, seq + 0.5)
    h.fault(0, "kill", 2.2, 3.2).fault(1, "latency", 20.0, 21.0)
    index = h.index()
    found = exposure.exposure(index, 100)
    required = ExposureSpec(committed={"kill": 1, "latency": 1, "partition": 1}, share=0.5)
    short = exposure.shortfall(found, required, index)
    assert short == ["latency: 0 committed transactions overlapped its 1 windows, 1 required",
                     "partition: 0 committed transactions overlapped its 0 windows, 1 required",
                     "20% of the committed transactions overlapped a kill/latency/partition window, 50% required"]
    assert exposure.shortfall(found, ExposureSpec(committed={"kill": 1}, share=0.1), index) == []
    assert "kill 2 in 1" in exposure.summary_line(found) and "20% of 10 committed" in exposure.summary_line(found)


def test_a_pipeline_without_a_client_history_is_measured_on_the_coordinators_log():
    """A user's app or Kafka Streams keeps no history: its transactions are the coordinator's."""
    from kchaos.verifier.coordinator_log import CoordinatorTxn

    def logged(txid: str, start: float, end: float, completed: str = "commit") -> CoordinatorTxn:
        return CoordinatorTxn(txid, 1, 0, int(start * 1000), 30000, 2, prepared=completed, completed=completed,
                              complete_ms=int(end * 1000))

    h = History().phase("steady", 0.0).fault(0, "kill", 10.0, 15.0).fault(1, "latency", 40.0, 45.0)
    coordinator = [logged("app-0", 9.0, 12.0), logged("app-1", 11.0, 11.5), logged("app-0", 12.0, 16.0, "abort"),
                   logged("seeder", 11.0, 12.0), logged("app-1", 30.0, 31.0),
                   CoordinatorTxn("app-0", 1, 0, 50_000, 30000, 2)]  # never completed: not a transaction
    txns = exposure.logged_transactions(coordinator, excluded={"seeder"})
    assert [(t.txid, t.outcome) for t in txns] == [("app-1", "committed"), ("app-0", "committed"),
                                                   ("app-0", "aborted"), ("app-1", "committed")]
    measured = exposure.exposure(h.index(), txns=txns)
    assert measured["evidence"] == "coordinator log" and measured["committed"] == 3
    assert measured["kinds"]["kill"]["committed"] == 2 and measured["kinds"]["latency"]["committed"] == 0
    short = exposure.shortfall(measured, ExposureSpec(committed={"kill": 2, "latency": 1}, share=0.5), h.index(), txns)
    assert short == ["latency: 0 committed transactions overlapped its 1 windows, 1 required"]
