"""The Java (kafka-clients) workload driver on real brokers: the same pipeline, history and
lineage as the librdkafka worker, and on a TV2 cluster it runs KIP-890 transactions (the epoch
bumps with every transaction end), which librdkafka never does."""

from __future__ import annotations

import json

from .test_workload import Harness, _events, _spec, committed, wait_for_history


def _run_until_both_commit(h: Harness) -> dict:
    """Seed until each worker has committed a transaction, then no more inputs.

    The Java worker's JVM starts seconds after the librdkafka one, which takes every partition
    first; the group hands w1 its share only at w0's next heartbeat. How long that takes depends
    on the machine's load (CI once saw the whole input processed before it), so the run waits on
    w1's first commit, not on a seeding time long enough. It waits on w0's too: once CI saw w1
    commit the run's only 4 transactions (350 inputs) before w0 committed any, and the seeding
    halted with w0 never having committed."""
    try:
        for slot in ("w1", "w0"):
            wait_for_history(h, f"{slot}.*", committed, timeout_s=120)
        h.workload.halt_seeding()
        return h.finish()
    finally:
        h.workload.close()  # a wait that timed out leaves no worker running


def test_java_client_pipeline_is_valid_and_speaks_tv2(cluster3, tmp_path):
    h = Harness(cluster3, tmp_path, _spec(client="java", records=1500, workers=2))
    results = h.finish()
    assert results["verdict"] == "valid", json.dumps(results["checks"], indent=1)
    assert results["facts"]["outputs_committed"] == 3000
    commits = [op for op in _events(h.ops(), "commit") if op["outcome"] == "ok"]
    assert commits and all(op.get("client") == "java" for op in commits)
    assert all(op.get("txn_v2") is True for op in commits), {op.get("txn_v2") for op in commits}
    # KIP-890: every transaction's end bumps the epoch, so one producer's commits climb
    by_process: dict[str, list[int]] = {}
    for op in commits:
        by_process.setdefault(op["process"], []).append(op["epoch"])
    assert any(len(set(epochs)) > 1 for epochs in by_process.values()), by_process
    # the transaction log says which protocol each transaction ran under
    assert results["facts"]["client_transaction_versions"].get("2", 0) > 0, results["facts"]
    # ... per transactional.id: each Java worker's committed transactions all ran under TV2
    per_txid = results["facts"]["commits_by_client_tv_per_txid"]
    worker_txids = {op["txid"] for op in commits}
    assert worker_txids and worker_txids <= set(per_txid), (worker_txids, per_txid)
    assert all(set(per_txid[t]) == {"2"} for t in worker_txids), per_txid


def test_mixed_clients_share_one_group_and_are_valid(cluster3, tmp_path):
    # seeded at 150 a second, up to 80 s, and halted once both have committed
    h = Harness(cluster3, tmp_path, _spec(client="mixed", records=12000, rate=150, workers=2, input_partitions=4))
    results = _run_until_both_commit(h)
    assert results["verdict"] == "valid", json.dumps(results["checks"], indent=1)
    clients = {op["value"]["slot"]: op["value"]["client"] for op in _events(h.ops(), "worker-start")}
    assert clients == {"w0": "confluent", "w1": "java"}
    committers = {op["process"].split(".")[0] for op in _events(h.ops(), "commit") if op["outcome"] == "ok"}
    assert committers == {"w0", "w1"}, committers


def test_both_clients_join_on_the_consumer_protocol_when_asked(cluster3, tmp_path):
    """``group_protocol = "consumer"`` (KIP-848) must put every worker on the new protocol. The
    group coordinator says which protocol each member joined with; a Java worker left on the
    classic defaults would still join, through the classic protocol, and be counted there."""
    import re

    spec = _spec(client="mixed", group_protocol="consumer", records=12000, rate=150, workers=2, input_partitions=4)
    h = Harness(cluster3, tmp_path, spec)
    results = _run_until_both_commit(h)
    assert results["verdict"] == "valid", json.dumps(results["checks"], indent=1)
    committers = {op["process"].split(".")[0] for op in _events(h.ops(), "commit") if op["outcome"] == "ok"}
    assert committers == {"w0", "w1"}, committers
    joins: dict[str, set[str]] = {}
    for node in cluster3.nodes:
        log = "".join(p.read_text(errors="replace") for p in sorted(node.logs_dir.glob("server.log*")))
        for member, protocol in re.findall(rf"\[GroupId {re.escape(spec.group_id)}\] Member (\S+) joins the consumer "
                                           r"group using the (\w+) protocol", log):
            joins.setdefault(protocol, set()).add(member)
    assert len(joins.get("consumer", ())) >= 2 and not joins.get("classic"), joins


def test_java_property_tables_are_checked_by_kafka_clients_before_any_cluster():
    """kafka-clients would only warn about an unknown name: the driver's --check-config makes it
    (and a value kafka-clients cannot parse) a one-line load error. Needs the compiled driver's
    JVM, no cluster."""
    import pytest

    from kchaos.errors import ConfigError
    from kchaos.workloads.java_client import check_java_properties
    from kchaos.workloads.spec import WorkloadSpec

    good = WorkloadSpec(client="java", producer={"request.timeout.ms": 3000, "delivery.timeout.ms": 10000,
                                                 "socket.connection.setup.timeout.ms": 500},
                        consumer={"fetch.max.wait.ms": 50})
    check_java_properties(good.model_dump(mode="json"), good.java_client_version)
    bad = WorkloadSpec(client="java", producer={"no.such.property": 1, "request.timeout.ms": "soon"})
    with pytest.raises(ConfigError) as err:
        check_java_properties(bad.model_dump(mode="json"), bad.java_client_version)
    message = str(err.value)
    assert "workload.producer.no.such.property: not a kafka-clients producer property" in message
    assert "request.timeout.ms" in message and "\n" not in message.strip()


def test_a_fleet_of_java_3x_and_4x_runs_transactions_each_on_its_own_protocol(cluster3, tmp_path):
    """Issue 72's fleet: kafka-clients 3.9.1 (w0) and 4.2.1 (w1) in one classic group on this TV2
    cluster. The 3.x driver (the same source, compiled against 3.9.1) runs transactions; it has
    no KIP-890 part 2, so its transactions are classic in the coordinator's log, while the 4.x
    worker's are TV2; every worker-start names the slot's client, release and label."""
    fleet = ({"client": "java", "version": "3.9.1"}, {"client": "java", "version": "4.2.1"})
    h = Harness(cluster3, tmp_path, _spec(fleet=fleet, records=12000, rate=150, input_partitions=4))
    results = _run_until_both_commit(h)
    assert results["verdict"] == "valid", json.dumps(results["checks"], indent=1)
    starts = {op["value"]["slot"]: op["value"] for op in _events(h.ops(), "worker-start")}
    assert {s: (v["client"], v["client_version"], v["label"]) for s, v in starts.items()} == {
        "w0": ("java", "3.9.1", "java 3.9.1"), "w1": ("java", "4.2.1", "java 4.2.1")}
    commits = [op for op in _events(h.ops(), "commit") if op["outcome"] == "ok"]
    by_slot = {slot: [op for op in commits if op["process"].startswith(f"{slot}.")] for slot in ("w0", "w1")}
    assert by_slot["w0"] and by_slot["w1"], {s: len(c) for s, c in by_slot.items()}
    assert {op.get("txn_v2") for op in by_slot["w0"]} == {False}  # 3.x: classic, a fact of the release
    assert {op.get("txn_v2") for op in by_slot["w1"]} == {True}
    per_txid = results["facts"]["commits_by_client_tv_per_txid"]
    w0, w1 = by_slot["w0"][0]["txid"], by_slot["w1"][0]["txid"]
    assert set(per_txid[w0]) == {"0"} and set(per_txid[w1]) == {"2"}, per_txid
    assert results["run"]["clients"] == ["Java kafka-clients 3.9.1", "Java kafka-clients 4.2.1"], results["run"]
