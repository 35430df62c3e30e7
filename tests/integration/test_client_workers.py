"""kchaos' workers on other Kafka clients (workloads/native_clients.py) on real brokers: each runs
a short faultless pipeline on the shared cluster and is valid, with its own client's history.
Their hunts (the default campaign, negative controls, zombies) are `kchaos run` campaigns in the
long tier (docs/clients.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .test_workload import Harness, _events, _spec

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


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_client_worker_pipeline_is_valid(cluster3, tmp_path, client):
    h = Harness(cluster3, tmp_path, _spec(client=client, records=300, workers=2, **CLIENTS[client]))
    results = h.finish()
    if client == "kafkajs":
        _kafkajs_duplicates_are_its_retries(h, results)
    else:
        assert results["verdict"] == "valid", json.dumps(results["checks"], indent=1)
        assert results["facts"]["outputs_committed"] == 600
    ops = h.ops()
    commits = [op for op in _events(ops, "commit") if op["outcome"] == "ok"]
    assert commits and all(op.get("client") == client for op in commits)
    # the producer id and epoch of each commit, read from the client (never guessed)
    assert all(op.get("pid") is not None and op.get("epoch") is not None for op in commits), commits[:3]
    inits = [op for op in _events(ops, "init") if op["outcome"] == "ok"]
    assert inits and all(op["txid"] for op in inits)


def _campaign_run(tmp_path, campaign: str, client: str, seed: int):
    from kchaos.clusters.processes import processes_with_marker
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
    paused past its session is refused by its generation: the run stays valid."""
    run, results = _campaign_run(tmp_path, "client-zombie", client, 1)
    assert results["verdict"] == "valid", json.dumps(results["checks"], indent=1)
    exits = [json.loads(line)["value"] for line in (run.path / "history.jsonl").open()
             if '"f":"worker-exit"' in line and '"type":"info"' in line]
    assert any(e["meaning"] == "fenced" and not e["current"] for e in exits), exits
