"""kchaos' workers on other Kafka clients (workloads/native_clients.py) on real brokers: each runs
a short faultless pipeline on the shared cluster and is valid, with its own client's history.
Their hunts (the default campaign, negative controls, zombies) are `kchaos run` campaigns in the
long tier (docs/clients.md)."""

from __future__ import annotations

import json

import pytest

from .test_workload import Harness, _events, _spec

#: per client: the spec overrides its proof needs. sarama's example resets the offset it would
#: commit after an abort but does not rewind the claim, so with intentional aborts its inputs are
#: skipped (docs/clients.md): its faultless proof runs without them.
CLIENTS = {"franz-go": {}, "kafkajs": {}, "aiokafka": {}, "kafka-python": {}, "sarama": {"abort_fraction": 0.0}}


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_client_worker_pipeline_is_valid(cluster3, tmp_path, client):
    h = Harness(cluster3, tmp_path, _spec(client=client, records=300, workers=2, **CLIENTS[client]))
    results = h.finish()
    assert results["verdict"] == "valid", json.dumps(results["checks"], indent=1)
    assert results["facts"]["outputs_committed"] == 600
    ops = h.ops()
    commits = [op for op in _events(ops, "commit") if op["outcome"] == "ok"]
    assert commits and all(op.get("client") == client for op in commits)
    # the producer id and epoch of each commit, read from the client (never guessed)
    assert all(op.get("pid") is not None and op.get("epoch") is not None for op in commits), commits[:3]
    inits = [op for op in _events(ops, "init") if op["outcome"] == "ok"]
    assert inits and all(op["txid"] for op in inits)
