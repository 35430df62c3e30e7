"""The broker's clock control (clusters/faketime.py): what its JVM's environment carries and what
the control file says. The settings that keep a JVM usable under libfaketime are pinned here:
losing one is a broker that spins or a clock that does not move."""

from kchaos.clusters import faketime


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
