import os
import sys
import time
from pathlib import Path

from kchaos.runtime.processes import ManagedProcess, PidFile, is_alive, live_processes, processes_with_marker, reap
from kchaos.waiting import wait_until


def _sleeper(tmp_path, name="p", marker=None):
    marker = marker or str(tmp_path)
    # The marker must be on the command line: pass it as an ignored argument.
    argv = [sys.executable, "-c", "import sys,time; time.sleep(600)", marker]
    return ManagedProcess(name, argv, tmp_path / f"{name}.log", tmp_path / "pids", marker)


def test_kill_removes_process_and_pid_file(tmp_path):
    proc = _sleeper(tmp_path)
    proc.start()
    pid = proc.pid
    assert proc.is_running() and (tmp_path / "pids" / "p.pid").exists()
    proc.kill()
    assert not is_alive(pid)
    assert not (tmp_path / "pids" / "p.pid").exists()
    assert processes_with_marker(str(tmp_path)) == []


def test_pause_and_resume(tmp_path):
    proc = _sleeper(tmp_path)
    proc.start()
    try:
        proc.pause()
        deadline = time.monotonic() + 5
        while not proc.is_paused() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert proc.is_paused()
        proc.resume()
        deadline = time.monotonic() + 5
        while proc.is_paused() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not proc.is_paused() and proc.is_running()
    finally:
        proc.kill()


def test_terminate_kills_a_paused_process(tmp_path):
    proc = _sleeper(tmp_path)
    proc.start()
    pid = proc.pid
    proc.pause()
    assert proc.terminate(timeout_s=5) is True  # SIGCONT before SIGTERM: a stopped process still exits
    assert not is_alive(pid)


def test_reap_after_the_owner_forgot(tmp_path):
    """A crashed harness leaves only pid files; reap() finds and kills what they name."""
    procs = [_sleeper(tmp_path, f"p{i}") for i in range(3)]
    for p in procs:
        p.start()
    pids = [p.pid for p in procs]
    assert sorted(live_processes(tmp_path)) == sorted(pids)
    killed = reap(tmp_path)
    assert sorted(killed) == sorted(pids)
    for p in procs:
        p.returncode() or p._popen.wait(5)  # collect our zombies
    assert not any(is_alive(pid) for pid in pids)
    assert list((tmp_path / "pids").glob("*.pid")) == []


def test_reap_never_kills_a_process_that_is_not_ours(tmp_path):
    """A pid file whose pid now belongs to another process (no marker) is ignored."""
    other = _sleeper(tmp_path / "other", marker=str(tmp_path / "other"))
    (tmp_path / "other").mkdir()
    other.start()
    try:
        (tmp_path / "mine").mkdir()
        PidFile(tmp_path / "mine" / "x.pid", other.pid, other.pid, marker=str(tmp_path / "mine")).write()
        assert reap(tmp_path / "mine") == []
        assert other.is_running()
    finally:
        other.kill()


def test_a_reaper_only_kills_what_its_own_harness_started(tmp_path):
    """A run's reaper fires when its harness ends; a later `kchaos analyze` on the same run
    directory has started a process of its own there, which must survive."""
    import os

    later = _sleeper(tmp_path)
    later.start()
    try:
        assert PidFile.read(later.pid_path).owner == os.getpid()
        assert reap(tmp_path, owner=os.getpid() + 100000) == []  # another harness's reaper
        assert later.is_running()
        assert reap(tmp_path, owner=os.getpid()) == [later.pid]
    finally:
        later.kill()


def test_adopt_takes_over_a_process_started_elsewhere(tmp_path):
    first = _sleeper(tmp_path)
    first.start()
    second = _sleeper(tmp_path)
    assert second.adopt() and second.pid == first.pid and second.is_running()
    second.kill()
    first._popen.wait(5)
    assert not is_alive(first.pid)


def test_reap_finds_what_its_harness_started_before_writing_the_pid_file(tmp_path):
    """A harness killed between starting a child and writing its pid file: the child carries the
    harness's pid in its environment, so that harness's reaper still kills it, and another
    harness's reaper does not."""
    import os
    import subprocess

    from kchaos.runtime.processes import STARTED_BY

    harness = 4_000_000  # no such pid: the harness is gone
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", str(tmp_path)],
                             env={**os.environ, STARTED_BY: str(harness)}, start_new_session=True)
    try:
        # until the child has exec'd, /proc shows the forking parent's command line and environment
        # (a harness crashes long after that; a test that reaps at once can be too early)
        wait_until(lambda: str(tmp_path) in Path(f"/proc/{child.pid}/cmdline").read_bytes().decode(errors="replace"),
                   10, 0.01, "the child exec'd")
        assert reap(tmp_path, owner=harness + 1) == [] and child.poll() is None
        assert reap(tmp_path, owner=harness) == [child.pid]
        assert child.wait(5) == -9
    finally:
        if child.poll() is None:
            child.kill()


def _restarted_elsewhere(tmp_path, marker: str, *, own_group: bool):
    """The same command started again by a shell line, as a campaign's node command does: either
    `setsid ... &` (a group of its own) or a plain `... &` (the shell's group: the test's own)."""
    import subprocess

    line = f"{'setsid ' if own_group else ''}{sys.executable} -c 'import time; time.sleep(600)' {marker} node-1.conf " \
           "> /dev/null 2>&1 < /dev/null &"
    subprocess.run(["/bin/sh", "-c", line], check=True, timeout=10)
    wait_until(lambda: processes_with_marker("node-1.conf"), 10, 0.01, "the restarted process")
    return processes_with_marker("node-1.conf")[0]


def test_a_process_restarted_behind_its_pid_file_is_found_by_its_identity_and_stopped(tmp_path):
    """issue 61: a node command restarted a `kchaos cluster up` node; its pid file named the dead
    JVM, so `cluster status` said stopped and `cluster down` left the new JVM running."""
    import os

    marker = str(tmp_path)
    argv = [sys.executable, "-c", "import time; time.sleep(600)", marker, "node-1.conf"]
    first = ManagedProcess("node-1", argv, tmp_path / "n.log", tmp_path / "pids", marker,
                           identity=(marker, "node-1.conf"))
    first.start()
    first.kill()  # a node command's kill: the pid file now names a process that is gone
    PidFile(tmp_path / "pids" / "node-1.pid", 4_000_000, 4_000_000, marker).write()  # no such pid
    for own_group in (True, False):
        again = _restarted_elsewhere(tmp_path, marker, own_group=own_group)
        attached = ManagedProcess("node-1", argv, tmp_path / "n.log", tmp_path / "pids", marker,
                                  identity=(marker, "node-1.conf"))
        assert attached.adopt() and attached.pid == again and attached.is_running()
        assert PidFile.read(tmp_path / "pids" / "node-1.pid").pid == again
        if own_group:
            attached.kill()
        else:  # in the shell's group, which is the test's: the process alone is signalled
            assert os.getpgid(again) != again
            assert reap(tmp_path) == [again]
        wait_until(lambda: not is_alive(again), 10, 0.05, "the restarted process stopped")
    assert processes_with_marker(marker) == []


def test_the_identity_is_whole_arguments_so_the_shell_that_started_it_is_not_it(tmp_path):
    import subprocess

    marker = str(tmp_path)
    shell = subprocess.Popen(["/bin/sh", "-c", f"sleep 600; echo {marker} node-1.conf"], start_new_session=True)
    try:
        wait_until(lambda: processes_with_marker("node-1.conf"), 10, 0.01, "the shell")
        proc = ManagedProcess("node-1", [sys.executable, marker, "node-1.conf"], tmp_path / "n.log", tmp_path / "pids",
                              marker, identity=(marker, "node-1.conf"))
        assert not proc.adopt()
    finally:
        os.killpg(shell.pid, 9)
        shell.wait(5)
