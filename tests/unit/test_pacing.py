"""Faults paced by the work (faults/pacing.py) over the workers' histories as they are written
(workloads/work_monitor.py): hand-made history files, no cluster."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from kchaos.faults.base import Aim
from kchaos.faults.pacing import Pacer
from kchaos.faults.schedule import ScheduledFault
from kchaos.faults.spec import PacingSpec
from kchaos.workloads.work_monitor import WorkMonitor


def _line(process: str, op: int, kind: str, f: str, t: float, **value) -> bytes:
    return (json.dumps({"time": t, "process": process, "op": op, "type": kind, "f": f, "value": value,
                        "txid": f"tx-{process.split('.')[0]}"}) + "\n").encode()


def _commits(path: Path, times: list[float], process: str = "w0.1", first_op: int = 0) -> None:
    with open(path, "ab") as fh:
        for i, t in enumerate(times):
            fh.write(_line(process, first_op + i, "invoke", "commit", t - 0.01, txn_seq=i))
            fh.write(_line(process, first_op + i, "ok", "commit", t, txn_seq=i))


def test_the_monitor_reads_whole_lines_only_and_keeps_what_is_under_way(tmp_path):
    path = tmp_path / "w0.1.jsonl"
    _commits(path, [10.0, 11.0])
    whole = _line("w0.1", 7, "invoke", "send_offsets", 12.0, txn_seq=3)
    with open(path, "ab") as fh:
        fh.write(whole[:20])  # a line being written: not read yet
    (tmp_path / "seeder.jsonl").write_bytes(_line("seeder", 0, "ok", "commit", 10.5))  # not a worker
    monitor = WorkMonitor(tmp_path)
    monitor.refresh()
    assert monitor.commits_between(0, 100) == 2 and monitor.in_flight() == []
    with open(path, "ab") as fh:
        fh.write(whole[20:])
    monitor.refresh()
    (op,) = monitor.in_flight("send_offsets")
    assert (op.process, op.txid, op.txn_seq, op.invoked) == ("w0.1", "tx-w0", 3, 12.0)
    assert monitor.commit_rate(9.0, 11.0) == 1.0


def _pacer(tmp_path: Path, **spec) -> Pacer:
    """A pacer over the histories in ``tmp_path``; the coordinators: tx-w0's is node 2, the group's 3."""
    return Pacer(PacingSpec(**spec), WorkMonitor(tmp_path), threading.Event(), lambda role: {"tx-w0": 2, "group": 3})


FAULT = ScheduledFault(0, 5.0, "kill", "txn-coordinator", 4.0, 1, {})


def test_recovery_waits_for_the_pipeline_to_commit_at_a_share_of_its_rate_before_the_previous_fault(tmp_path):
    pacer = _pacer(tmp_path, mode="recovery", window_s=1.0, max_wait_s=0.5)
    path = tmp_path / "w0.1.jsonl"
    now = time.time()
    _commits(path, [now - 0.9 + i * 0.1 for i in range(9)])  # 9 commits in the last second
    first = pacer.wait_for_recovery(FAULT)
    assert first["recovered"] and first["waited_s"] < 0.5 and first["baseline"] is None  # the first: any commit
    baseline = pacer.baseline
    assert baseline is not None and baseline >= 8
    # the next fault: the pipeline has committed nothing since; it waits out max_wait_s and says so
    time.sleep(1.0)
    second = pacer.wait_for_recovery(FAULT)
    assert second["recovered"] is False and second["waited_s"] >= 0.5 and "starts anyway" in second["why"]
    assert second["baseline"] == round(baseline, 1) and pacer.baseline == baseline  # a stalled start sets no yardstick


def test_a_catch_up_after_a_fault_does_not_raise_the_yardstick_of_commits(tmp_path):
    """After a fault the pipeline drains its backlog: a commit rate three times the steady one
    (certify-tv-flip seed 27: 37 against 11-13 a second) must not become the yardstick, or every
    later fault waits out max_wait_s on a pipeline back at its steady rate."""
    pacer = _pacer(tmp_path, mode="recovery", window_s=1.0, max_wait_s=0.5)
    path = tmp_path / "w0.1.jsonl"
    now = time.time()
    _commits(path, [now - 0.9 + i * 0.1 for i in range(9)])  # steady: 9 a second
    assert pacer.wait_for_recovery(FAULT)["recovered"]
    steady = pacer.baseline
    now = time.time()
    _commits(path, [now - 0.95 + i * 0.03 for i in range(30)], first_op=100)  # a catch-up: 30 a second
    catch_up = pacer.wait_for_recovery(FAULT)
    assert catch_up["recovered"] and catch_up["rate"] >= 3 * steady and pacer.baseline == steady
    time.sleep(1.0)
    now = time.time()
    _commits(path, [now - 0.9 + i * 0.1 for i in range(9)], first_op=200)  # steady again: no wait
    again = pacer.wait_for_recovery(FAULT)
    assert again["recovered"] and again["waited_s"] < 0.2 and "why" not in again


def test_a_scheduled_pacing_or_a_pipeline_without_history_starts_on_time(tmp_path):
    pacer = _pacer(tmp_path)  # mode "schedule"
    assert pacer.wait_for_recovery(FAULT) == {}
    pacer = _pacer(tmp_path, mode="recovery")  # no w*.jsonl at all
    decision = pacer.wait_for_recovery(FAULT)
    assert decision["recovered"] is None and "no client history" in decision["why"]


def test_a_pipeline_without_history_is_paced_by_its_groups_offsets_and_never_aimed(tmp_path):
    """A user's app or Kafka Streams keeps no history: the group's committed offsets say whether it
    commits again (their rate), and nothing says what is under way (no aim)."""
    group = {"offsets": {0: 100, 1: 50}, "readable": True}

    def read() -> dict[int, int]:
        if not group["readable"]:
            raise RuntimeError("the group coordinator is down")
        return dict(group["offsets"])

    monitor = WorkMonitor(tmp_path, offsets_reader=read)
    assert not monitor.has_history and monitor.signal == "group offsets"
    pacer = Pacer(PacingSpec(mode="recovery", window_s=2.0, max_wait_s=3.0, aim=True), monitor, threading.Event(),
                  lambda role: {"tx-w0": 2, "group": 3})

    def paced(step: int) -> dict:
        """The pacer's decision while the app commits ``step`` input offsets every 100 ms."""
        def advance() -> None:
            for _ in range(30):
                time.sleep(0.1)
                group["offsets"][0] += step

        mover = threading.Thread(target=advance)
        mover.start()
        decision = pacer.wait_for_recovery(FAULT)
        mover.join()
        return decision

    first = paced(2)  # 20 input offsets a second
    assert first["recovered"] and first["signal"] == "group offsets" and 0 < first["rate"] <= 40
    baseline = pacer.baseline
    # a catch-up after a fault (offsets far past the input's rate) does not raise the yardstick
    again = paced(50)
    assert again["recovered"] and again["rate"] > 5 * baseline and pacer.baseline == baseline
    assert pacer.aim(FAULT) == {"aimed": False,
                                "why": "the pipeline keeps no client history: no commit under way can be seen"}
    # offsets that stand still, or cannot be read at all, are no recovery: it waits out max_wait_s
    group["readable"] = False
    second = pacer.wait_for_recovery(FAULT)
    assert second["recovered"] is False and "starts anyway" in second["why"]
    # without a reader either, there is no signal: on schedule, as before
    assert WorkMonitor(tmp_path).signal is None


def test_a_coordinator_kill_is_aimed_at_a_commit_under_way_and_takes_its_coordinator(tmp_path):
    pacer = _pacer(tmp_path, mode="recovery", aim=True, aim_wait_s=1.0)
    path = tmp_path / "w0.1.jsonl"
    path.write_bytes(_line("w0.1", 0, "invoke", "commit", time.time() - 5.0, txn_seq=1))  # stale: its worker is stuck

    def commit_soon() -> None:
        time.sleep(0.2)
        with open(path, "ab") as fh:
            fh.write(_line("w0.1", 1, "invoke", "commit", time.time(), txn_seq=2))

    threading.Thread(target=commit_soon).start()
    aim = pacer.aim(FAULT)
    assert isinstance(aim, Aim) and (aim.txid, aim.txn_seq, aim.node) == ("tx-w0", 2, 2)
    assert aim.to_json()["seen_after_ms"] < 500
    # not a coordinator fault, or aiming off: no aim; nothing under way: says why
    assert pacer.aim(ScheduledFault(0, 5.0, "latency", "all-clients", 4.0, 1, {})) is None
    missed = pacer.aim(ScheduledFault(0, 5.0, "kill", "group-coordinator", 4.0, 1, {}))
    assert missed == {"aimed": False, "why": "no send_offsets under way within 1s"}

