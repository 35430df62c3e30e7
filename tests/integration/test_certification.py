"""A short transaction.version flip campaign on real brokers with both clients, run the way
`kchaos run` runs it: certified per phase and client, and the phase boundaries agree with what
the transaction log says each Java transaction ran under."""

from __future__ import annotations

import json

import pytest

from kchaos.harness.campaign import load_campaign
from kchaos.harness.run import execute_run
from kchaos.runtime.processes import processes_with_marker
from kchaos.verifier.run_data import RunData

FLIP = """
name = "flip-test"
[run]
duration_s = 75
seed = 5
[cluster]
nodes = 3
transaction_version = 1
[workload]
client = "mixed"
records = 7500
rate = 100
workers = 2
input_partitions = 4
max_batch = 20
transaction_timeout_ms = 10000
# inputs are seeded for the whole 75 s; the Java workers' JVMs take seconds to start, so the
# first phase is 20 s long, and the one coordinator kill comes well after the last step: every
# phase keeps >= 12 s of work for both clients, never vacuous by bad luck on a loaded machine
[faults]
order = "round-robin"
start_after_s = 60
interval_s = 50
duration_s = 3
[[faults.mix]]
kind = "kill"
target = "txn-coordinator"
[[steps]]
at_s = 20
action = "feature"
feature = "transaction.version"
level = 2
restart_workers = true
[[steps]]
at_s = 45
action = "feature"
feature = "transaction.version"
level = 1
restart_workers = true
"""


@pytest.mark.cluster
@pytest.mark.long  # a certification campaign (about 3 minutes); certification logic is unit-tested
def test_short_tv_flip_campaign_certifies_both_clients(tmp_path):
    path = tmp_path / "flip.toml"
    path.write_text(FLIP)
    run, outcome = execute_run(load_campaign(path), tmp_path / "runs", campaign_path=path)
    cert = json.loads((run.path / "certification.json").read_text())
    assert outcome.exit_code == 0 and cert["overall"] == "pass", json.dumps({k: cert[k] for k in ("reasons", "rows")}, indent=1)
    assert processes_with_marker(str(run.path)) == []
    assert cert["clients"] == ["confluent", "java"]
    flip_up, flip_down = cert["steps"]
    assert flip_up["features_after"]["transaction.version"] == 2
    assert flip_down["features_after"]["transaction.version"] == 1
    for row in cert["rows"]:
        if not row["phase"].startswith("during"):
            assert row["verdict"] == "valid" and row["committed_transactions"] > 0, row

    # The transaction log: when did the coordinator see KIP-890 transactions from the Java workers?
    prefix = next(json.loads(line)["value"]["txid_prefix"] for line in (run.path / "history.jsonl").open()
                  if '"f":"setup"' in line)
    java_txids = {f"{prefix}-w1"}
    tv2_times, classic_times = [], []
    for rec in RunData.decoded_txn_log(run.path):
        e = rec["entry"]
        if e.transactional_id in java_txids and e.status == "CompleteCommit":
            (tv2_times if e.client_transaction_version == 2 else classic_times).append(e.last_update_ms / 1000)
    assert tv2_times, "the Java client never ran a KIP-890 transaction after the flip"
    # none before the flip to 2 started, none after the flip back to 1 and its worker restarts ended
    assert min(tv2_times) >= flip_up["start"] and max(tv2_times) <= flip_down["end"]
    assert any(t < flip_up["start"] for t in classic_times) and any(t > flip_down["end"] for t in classic_times)
    # and the report says so, phase by phase
    html = (run.path / "report.html").read_text()
    assert "Certification:" in html and "after step 0: transaction.version -&gt; 2" in html
