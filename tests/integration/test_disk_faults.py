"""The disk-full fault on a real broker (faults/kinds/disk.py): its log directory on a small
filesystem fills, the broker takes the directory offline and stops (one log directory, the
metadata log in it), heal frees the space and starts it, and it serves again. Its data stays with
the run after the cluster stops."""

from __future__ import annotations

import uuid

from confluent_kafka import Producer

from kchaos.clusters.clients import create_topic, quiet
from kchaos.faults.base import FaultContext
from kchaos.faults.kinds import make_fault
from kchaos.faults.schedule import ScheduledFault
from kchaos.runtime import small_disk
from kchaos.waiting import wait_until

from .conftest import start_local


def _produce(cluster, topic: str, n: int, timeout_s: float = 10.0) -> int:
    """Records the broker acknowledged out of ``n``."""
    acked: list[int] = []
    producer = Producer(quiet({**cluster.client_config(), "acks": "all", "message.timeout.ms": int(timeout_s * 1000)}))
    for i in range(n):
        producer.produce(topic, b"x" * 10_000, on_delivery=lambda err, msg: acked.append(1) if err is None else None)
    producer.flush(timeout_s + 5)
    return len(acked)


def test_a_full_log_directory_stops_the_broker_and_heal_brings_it_back(tmp_path):
    cluster = start_local(tmp_path, nodes=1, disk_limit_mb=96, proxy_clients=False, proxy_internal=False)
    try:
        node = cluster.node(1)
        assert small_disk.mounts_under(tmp_path) == [node.data_dir.resolve()]
        topic = f"disk-{uuid.uuid4().hex[:6]}"
        create_topic(cluster, topic, 1, 1)
        assert _produce(cluster, topic, 20) == 20
        fault = make_fault(ScheduledFault(0, 0.0, "disk-full", "random", 5.0, 1, {}), FaultContext(cluster))
        filled = fault.invoke()["detail"]["filled"]["1"]
        assert filled["free_after_bytes"] < 1024 * 1024 and filled["filled_bytes"] > 50 * 1024 * 1024
        # its next appends fail: the broker takes the directory offline and, having no other, stops
        assert _produce(cluster, topic, 20, timeout_s=5) < 20
        wait_until(lambda: not node.is_running, 60, 0.5, "the broker did not stop on a full log directory")
        healed = fault.heal()
        assert healed["stopped"] == [1] and healed["freed_bytes"]["1"] == filled["filled_bytes"]
        assert healed["broker_said"]["1"], "the broker's log names the failed directory"
        cluster.wait_healthy(120)
        cluster._close_admin()
        assert _produce(cluster, topic, 20, timeout_s=30) == 20
    finally:
        cluster.stop()
    assert small_disk.mounts_under(tmp_path) == []
    assert any(node.data_dir.glob(f"{topic}-0/*.log")), "the partition's data stayed with the run"


def test_the_reaper_unmounts_a_small_disk_a_dead_harness_left_and_keeps_its_data(tmp_path):
    import os
    import subprocess
    import sys

    data = tmp_path / "cluster" / "node-1" / "data"
    small_disk.mount(data, 64)
    (data / "segment.log").write_bytes(b"kept")
    small_disk.fill(data, 0)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    done = subprocess.run([sys.executable, "-m", "kchaos.runtime.reaper", str(dead.pid)],
                          env={**os.environ, "KCHAOS_REAP_DIR": str(tmp_path)}, timeout=60)
    assert done.returncode == 0
    assert small_disk.mounts_under(tmp_path) == []
    assert (data / "segment.log").read_bytes() == b"kept" and not (data / small_disk.FILLER).exists()


def test_the_filler_takes_what_is_free_when_the_free_space_it_read_is_stale(tmp_path, monkeypatch):
    """A broker appends between the filler's reading of the free space and its fallocate (a few
    KB, not a whole page): fallocate refuses the stale size, and the writes that follow take what
    is left. The fault must fill the disk, not fail with ENOSPC (nemesis-all seed 2 on 4.2.1)."""
    data = tmp_path / "data"
    small_disk.mount(data, 8)
    try:
        real = small_disk.usage
        for over in (1000, 3000, 6000):  # the broker's append, in bytes
            first = iter([over])  # only the filler's first reading is stale

            def stale(path, first=first):
                found = real(path)
                return {**found, "free_bytes": found["free_bytes"] + next(first, 0)}

            monkeypatch.setattr(small_disk, "usage", stale)
            filled = small_disk.fill(data, 0)
            assert filled["free_after_bytes"] == 0 and filled["filled_bytes"] > 7 * 1024 * 1024, (over, filled)
            assert small_disk.free(data) == filled["filled_bytes"]
    finally:
        monkeypatch.undo()
        small_disk.unmount(data, keep=False)
