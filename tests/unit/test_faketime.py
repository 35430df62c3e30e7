"""The broker's clock control (kchaos/runtime/faketime.py): what its JVM's environment carries and what
the control file says. The settings that keep a JVM usable under libfaketime are pinned here:
losing one is a broker that spins or a clock that does not move."""

from kchaos.runtime import faketime


def test_the_offset_is_written_whole_and_signed(tmp_path):
    control = tmp_path / "faketime.rc"
    faketime.write_offset(control, 3600)
    assert control.read_text() == "+3600.000\n"
    faketime.write_offset(control, -0.5)
    assert control.read_text() == "-0.500\n" and not (tmp_path / "faketime.rc.tmp").exists()


def test_the_jvm_environment_moves_only_the_wall_clock_and_keeps_timed_waits_working(tmp_path):
    env = faketime.environment(tmp_path / "faketime.rc", tmp_path / "libfaketimeMT.so.1")
    assert env["LD_PRELOAD"].endswith("libfaketimeMT.so.1")
    assert env["FAKETIME_TIMESTAMP_FILE"] == str(tmp_path / "faketime.rc")
    assert env["FAKETIME_DONT_FAKE_MONOTONIC"] == "1"  # System.nanoTime stays true
    assert env["FAKETIME_FORCE_MONOTONIC_FIX"] == "0"  # on, every parkNanos returns at once: a spinning broker
    assert int(env["FAKETIME_CACHE_DURATION"]) == faketime.CACHE_S


def test_clock_fault_parameters_are_refused_when_they_cannot_be_applied():
    import pytest

    from kchaos.faults.kinds import KINDS

    for kind, params, words in (("clock-bump", {"offset_s": 0.0}, "non-zero"),
                                ("clock-bump", {"offset_s": 40 * 86400.0}, "30 days"),
                                ("clock-strobe", {"period_s": 0.5}, "at least 1 s"),
                                ("clock-drift", {"rate": -1.0}, "from -0.9 to 100")):
        with pytest.raises(ValueError, match=words):
            KINDS[kind].check_params(params)
    assert KINDS["clock-bump"].check_params({"offset_s": -120.0}).offset_s == -120.0  # back is allowed


def test_a_bump_with_an_idle_worker_pauses_the_coordinated_ids_owner_and_resumes_it_after_the_clock(monkeypatch):
    """idle_worker: the worker whose transactional id the target coordinates is stopped before the
    clock moves and resumed only once the clock is true again (hand-made cluster and pool; the
    clock probe answers what the fault set)."""
    from types import SimpleNamespace

    from kchaos.faults import base
    from kchaos.faults.kinds import clock, make_fault
    from kchaos.faults.schedule import ScheduledFault
    from kchaos.workloads.spec import WorkloadSpec

    events, offsets = [], {1: 0.0}

    class Node:
        def set_clock_offset(self, offset_s):
            offsets[1] = offset_s
            events.append(("clock", offset_s))

    class Pool:
        slots = {"w0": None, "w1": None, "w2": None}

        def suspend(self, slot):
            events.append(("pause", slot))
            return {"slot": slot, "pid": 42}

        def resume_all(self):
            events.append(("resume",))

    cluster = SimpleNamespace(brokers=[SimpleNamespace(node_id=1)], require=lambda capability: None,
                              node=lambda nid: Node(), transaction_coordinator=lambda txid: 1,
                              partition_metadata=lambda topic: {0: SimpleNamespace(leader=1)})
    workload = SimpleNamespace(spec=WorkloadSpec(workers=3), txid_prefix="kchaos-abc", pool=Pool())
    monkeypatch.setattr(clock, "measure_broker_clocks", lambda cluster, samples, nodes: {
        "brokers": {"1": {"offset_ms": offsets[1] * 1000}}})
    fault = make_fault(ScheduledFault(0, 0.0, "clock-bump", "txn-coordinator", 5.0, 7,
                                      {"offset_s": 691200.0, "idle_worker": True}),
                       base.FaultContext(cluster, workload))
    target = fault.invoke()
    txid = target["detail"]["transactional_id"]
    idle = target["detail"]["idle_worker"]
    assert txid.endswith(f"-{idle['slot']}") and idle["owns_target_transactional_id"]
    assert events == [("pause", idle["slot"]), ("clock", 691200.0)]
    healed = fault.heal()
    assert events[2:] == [("clock", 0.0), ("resume",)] and healed["resumed_worker"] == idle["slot"]
