"""A Kafka Streams application as the pipeline (workload.client = "streams") on real brokers:
exactly_once_v2 survives a crash mid-transaction; at_least_once is caught (duplicate)."""

from __future__ import annotations

import json

from kchaos.verifier.checks import OBSERVATION_CHECKS
from tests.integration.test_workload import Harness, _events, _spec, committed, wait_for_history, wait_in_flight


def test_streams_exactly_once_v2_is_valid_across_a_crash(cluster3, tmp_path):
    # Input keeps arriving until the restarted instance has committed, then stops: with a fixed
    # amount, a slow JVM start under CI's load let the input run out before the restarted
    # instance (a JVM and a rebalance away) had any to commit (twice in CI, at 1000/s and 150/s)
    h = Harness(cluster3, tmp_path, _spec(client="streams", records=100_000, rate=150, workers=2,
                                          restart_backoff_s=0.2))
    # kill w1 with a transaction open (its sends begun, not yet committed): Streams on the
    # restarted instance (a new producer, fenced by the group's generation) must redo it once
    wait_for_history(h, "w1.1", committed)
    wait_in_flight(h, "w1", "send", hold_s=0.01)
    h.workload.pool.crash("w1")
    wait_for_history(h, "w1.2", committed)
    h.workload.halt_seeding()
    results = h.finish()
    assert results["verdict"] == "valid", json.dumps(results["checks"], indent=1)
    assert results["facts"]["inputs_committed"] > 0
    assert results["facts"]["outputs_committed"] == 2 * results["facts"]["inputs_committed"]
    ops = h.ops()
    commits = [op for op in _events(ops, "commit") if op["outcome"] == "ok"]
    # the history is Streams' own: its producers' transactional ids (application.id-process-thread)
    assert commits and all(op["client"] == "streams" for op in commits)
    assert all(op["txid"].startswith(h.workload.spec.group_id + "-") for op in commits)
    assert {op["process"] for op in commits} >= {"w0.1", "w1.2"}
    states = {(op["value"]["from"], op["value"]["to"]) for op in _events(ops, "streams-state")}
    assert ("REBALANCING", "RUNNING") in states
    # every check had its evidence (the lineage names the transactions the history recorded),
    # but the read-side ones: this run has no observers, and they say so
    assert {check: reason for check, reason in results["not_checked"].items()
            if reason != "the run had no observers ([observers] count = 0)"} == {}
    assert set(results["not_checked"]) == set(OBSERVATION_CHECKS)


def test_streams_at_least_once_is_caught_under_a_crash(cluster3, tmp_path):
    h = Harness(cluster3, tmp_path, _spec(client="streams", delivery="at-least-once", records=3000, rate=1000,
                                          workers=2, abort_fraction=0, restart_backoff_s=0.2,
                                          streams_commit_interval_ms=5000))
    # at_least_once commits offsets every commit.interval.ms: a crash with a batch's outputs
    # written and not flushed or committed makes the restarted instance write them again
    wait_in_flight(h, "w0", "send", hold_s=0.5)
    h.workload.pool.crash("w0")
    results = h.finish()
    assert results["facts"]["inputs_committed"] == 3000
    assert results["verdict"] == "invalid", json.dumps(results["checks"], indent=1)
    assert "duplicate" in results["anomaly_types"]
