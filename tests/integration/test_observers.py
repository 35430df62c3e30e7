"""Observers on real brokers (workloads/observer.py): read_committed readers of every user topic
throughout a run, a partition leader killed under them; what they read checked against the
final log by the read-side checks. A read_uncommitted observer is the negative control: it reads
aborted records, and both engines must name that."""

from __future__ import annotations

import json
import time

import pytest

from kchaos.verifier.checks import OBSERVATION_CHECKS
from kchaos.verifier.spark.checks import check_run_spark
from kchaos.workloads.spec import ObserverSpec

from .conftest import restore
from .test_workload import Harness, _spec, committed, wait_for_history


def test_observers_read_every_committed_record_in_order_through_a_leader_kill(_cluster3_session, tmp_path):
    cluster = _cluster3_session
    restore(cluster)
    spec = _spec(records=1500, rate=500)
    h = Harness(cluster, tmp_path, spec, observers=ObserverSpec(count=2))
    try:
        wait_for_history(h, "w*", committed)
        victim = cluster.node(cluster.leader(spec.output_topics[0], 0))
        killed_at = time.time()
        victim.kill()  # the observers' fetches move to a new leader mid-run
        wait_for_history(h, "w*", lambda line: committed(line) and line["time"] > killed_at + 2)
        victim.start()
        # the run claims every broker registered at its end: the restarted one recovers its logs
        # (RECOVERY, several seconds after a SIGKILL) before the controller unfences it
        cluster.wait_healthy(120)
        results = h.finish()
    finally:
        h.workload.close()
        restore(cluster)
    assert results["verdict"] == "valid", json.dumps(results["checks"], indent=1)
    assert all(results["checks"][name]["verdict"] == "valid" for name in OBSERVATION_CHECKS), results["checks"]
    final = h.run.read_json("final.json")
    summary = final["observers"]
    assert [o["caught_up"] for o in summary["observers"]] == [True, True], summary
    committed_records = results["facts"]["inputs_committed"] + results["facts"]["outputs_committed"]
    # each observer read every committed record once (nothing else: unseen, aborted reads and
    # repeats are all valid above), so the table holds exactly two of each
    assert summary["rows"] == 2 * committed_records
    assert (h.run.path / "observers" / "o0.jsonl").exists() and (h.run.path / "observers" / "o1.jsonl").exists()


@pytest.fixture(scope="module")
def uncommitted_observer_run(_cluster3_session, tmp_path_factory):
    restore(_cluster3_session)
    h = Harness(_cluster3_session, tmp_path_factory.mktemp("uncommitted"),
                _spec(records=600, rate=1000, abort_fraction=0.3, seed_abort_fraction=0.3),
                observers=ObserverSpec(count=1, isolation="read_uncommitted"))
    results = h.finish()
    return h.run.path, results


def test_a_read_uncommitted_observer_is_caught_by_the_reference(uncommitted_observer_run):
    run, results = uncommitted_observer_run
    assert results["verdict"] == "invalid" and results["anomaly_types"] == ["observed-aborted-read"], results["checks"]
    case = results["anomalies"]["observed-aborted-read"][0]
    assert "read_uncommitted, a record the final log holds only in its uncommitted view" in case["explanation"]


def test_a_read_uncommitted_observer_is_caught_by_spark(uncommitted_observer_run, spark):
    run, reference = uncommitted_observer_run
    results = check_run_spark(spark, run).to_json()
    assert results["verdict"] == "invalid" and results["anomaly_types"] == ["observed-aborted-read"], results["checks"]
    assert results["checks"]["observed-aborted-read"]["note"] == reference["checks"]["observed-aborted-read"]["note"]
