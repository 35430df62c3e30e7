"""kchaos' workers on other Kafka clients (workloads/native_clients.py) on real brokers: each runs
a short faultless pipeline on the shared cluster and is valid, with its own client's history.
Their hunts (the default campaign, negative controls, zombies) are `kchaos run` campaigns in the
long tier (docs/clients.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kchaos.workloads.native_clients import CLIENTS as NATIVE

from .test_workload import Harness, _events, _spec, committed, wait_for_history

#: per client: the spec overrides its proof needs. sarama's example resets the offset it would
#: commit after an abort but does not rewind the claim, so with intentional aborts its inputs are
#: skipped (docs/clients.md): its faultless proof runs without them.
CLIENTS = {"franz-go": {}, "kafkajs": {}, "aiokafka": {}, "kafka-python": {}, "sarama": {"abort_fraction": 0.0}}
#: the Kafka error KafkaJS 2.2.4's sendBatch retries whole, writing again the records of the partitions
#: whose write had succeeded, inside the same transaction (docs/clients.md, "KafkaJS duplicates")
CONCURRENT_TRANSACTIONS = "another concurrent operation on the same transaction was ongoing"


def _kafkajs_duplicates_are_its_retries(h: Harness, results: dict) -> None:
    """KafkaJS 2.2.4 on a faultless cluster: the only anomaly it may show is duplicate, each case
    written twice by one transaction (the same transactional id and transaction), after a
    CONCURRENT_TRANSACTIONS answer its worker logged."""
    assert set(results["anomalies"]) <= {"duplicate"}, results["anomalies"].keys()
    cases = results["anomalies"].get("duplicate", [])
    for case in cases:
        assert len({(r["txid"], r["txn_seq"]) for r in case["records"]}) == 1, case
    if cases:
        logs = "".join(p.read_text(errors="replace") for p in (h.run.path / "workers").glob("w*.log"))
        assert CONCURRENT_TRANSACTIONS in logs


def _aiokafka_duplicates_follow_a_rebalance(h: Harness, results: dict) -> None:
    """aiokafka 0.14.0 has no KIP-447 (docs/clients.md): a member that gets a partition while the
    previous owner's offsets are still pending in its transaction reads the older committed offset
    and processes those inputs again. So on a faultless cluster the only anomaly it may show is
    duplicate, each case's copies written by two transactions with a group assignment between
    their starts (CI, 2026-11-28: 136 such cases around the second worker's join)."""
    assert set(results["anomalies"]) <= {"duplicate"}, results["anomalies"].keys()
    assigns = [op["invoke_time"] for op in _events(h.ops(), "assign")]
    for case in results["anomalies"].get("duplicate", []):
        begun = sorted(t["history_op"]["invoke_time"] for t in case["transactions"])
        assert len({(r["txid"], r["txn_seq"]) for r in case["records"]}) > 1, case
        assert any(begun[0] <= a <= begun[-1] for a in assigns), case


def _settings(ops: list[dict], client: str, static: bool) -> None:
    """Every process said first how it joined: the slot's static member id where the client has
    KIP-345, else a dynamic member that names the setting it could not honour."""
    settings = _events(ops, "settings")
    assert settings and all(op["client"] == client and op["outcome"] == "ok" for op in settings)
    kip345 = static and NATIVE[client].instance_id_option is not None
    for op in settings:
        slot = op["process"].split(".")[0]
        assert op["value"]["group_instance_id"] == (f"{op['value']['group_id']}-{slot}" if kip345 else None), op
        assert ("workload.static_membership" in op["value"]["not_honoured"]) == (static and not kip345), op
    if kip345:
        group = settings[0]["value"]["group_id"]
        assigns = _events(ops, "assign")
        assert assigns and all(op["value"].get("group_instance_id") == f"{group}-{op['process'].split('.')[0]}"
                               for op in assigns), assigns


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_client_worker_pipeline_is_valid(cluster3, tmp_path, client):
    # static members, as the default campaign has them (a client without KIP-345 joins dynamically)
    h = Harness(cluster3, tmp_path, _spec(client=client, records=300, workers=2, static_membership=True,
                                          **CLIENTS[client]))
    results = h.finish()
    if client == "kafkajs":
        _kafkajs_duplicates_are_its_retries(h, results)
    elif client == "aiokafka":
        _aiokafka_duplicates_follow_a_rebalance(h, results)
    else:
        assert results["verdict"] == "valid", json.dumps(results["checks"], indent=1)
        assert results["facts"]["outputs_committed"] == 600
    ops = h.ops()
    _settings(ops, client, static=True)
    commits = [op for op in _events(ops, "commit") if op["outcome"] == "ok"]
    assert commits and all(op.get("client") == client for op in commits)
    # the producer id and epoch of each commit, read from the client (never guessed)
    assert all(op.get("pid") is not None and op.get("epoch") is not None for op in commits), commits[:3]
    inits = [op for op in _events(ops, "init") if op["outcome"] == "ok"]
    assert inits and all(op["txid"] for op in inits)


def _campaign_run(tmp_path, campaign: str, client: str, seed: int):
    from kchaos.runtime.processes import processes_with_marker
    from kchaos.harness.campaign import load_campaign
    from kchaos.harness.run import execute_run

    run, outcome = execute_run(load_campaign(Path(campaign), [f"workload.client={client}", f"run.seed={seed}"]),
                               tmp_path / "runs")
    assert processes_with_marker(str(run.path)) == []
    return run, json.loads((run.path / "results.json").read_text())


@pytest.mark.cluster
@pytest.mark.long  # one campaign per client (about 4 minutes each)
@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_client_worker_at_least_once_is_caught(tmp_path, client):
    """The negative control on every client: crashes and pauses between the writes and the offset
    commit duplicate inputs, and the verifier says so."""
    _, results = _campaign_run(tmp_path, "client-at-least-once", client, 11)
    assert results["verdict"] == "invalid" and "duplicate" in results["anomalies"], results["anomalies"].keys()


@pytest.mark.cluster
@pytest.mark.long  # one campaign per client (about 4 minutes each)
@pytest.mark.parametrize("client", ["franz-go", "kafka-python"])
def test_a_kip447_client_fences_its_zombies(tmp_path, client):
    """A replaced worker resumed past the transaction timeout is fenced (exit 10), and a member
    paused past its session is refused by its generation: the run stays valid. kafka-python 3.0.12
    keeps the refused offsets and a later transaction commits them (docs/findings.md F19): its run
    is valid, or invalid by that alone (the stray commit, carried by another transaction, and what
    the moved offset does to inputs)."""
    run, results = _campaign_run(tmp_path, "client-zombie", client, 1)
    if client == "kafka-python" and results["verdict"] == "invalid":
        assert set(results["anomaly_types"]) <= {"stray-offset-commit", "lost-input", "offsets-backwards", "duplicate"}, \
            results["anomaly_types"]
        assert any(c.get("carried") for c in results["anomalies"]["stray-offset-commit"]), results["anomalies"]
    else:
        assert results["verdict"] == "valid", json.dumps(results["checks"], indent=1)
    exits = [json.loads(line)["value"] for line in (run.path / "history.jsonl").open()
             if '"f":"worker-exit"' in line and '"type":"info"' in line]
    assert any(e["meaning"] == "fenced" and not e["current"] for e in exits), exits


@pytest.mark.long  # about a minute per client
@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_a_replaced_static_member_is_fenced(cluster3, tmp_path, client):
    """A worker paused within its session and replaced: the replacement joins with the slot's
    group instance id and takes its partitions; the old process, resumed, is fenced (its member id
    or its producer; exit 10) and the run stays valid. KafkaJS's members are dynamic: its zombie is
    fenced by its producer alone."""
    h = Harness(cluster3, tmp_path, _spec(client=client, records=4000, rate=200, static_membership=True,
                                          transaction_timeout_ms=10000, session_timeout_ms=10000, **CLIENTS[client]))
    wait_for_history(h, "w0.*", committed)
    info = h.workload.pool.zombie("w0", pause_s=3, overlap_s=5)
    h.history.event("client-fault", {"kind": "zombie", **info})
    results = h.finish()
    assert results["verdict"] == "valid", json.dumps(results["checks"], indent=1)
    ops = h.ops()
    _settings(ops, client, static=True)
    exits = {op["value"]["incarnation"]: op["value"] for op in _events(ops, "worker-exit") if op["value"]["slot"] == "w0"}
    assert exits[info["zombie_incarnation"]]["meaning"] == "fenced", exits
    zombie = f"w0.{info['zombie_incarnation']}"
    assert any(op["process"] == zombie for op in _events(ops, "fenced")), [op for op in ops if op["process"] == zombie][-5:]
