"""The share-group (KIP-932) pipeline on real 4.2 brokers: a faultless run is valid and says
it is at-least-once (KIP-1289 detected absent), and anomalies injected into it afterwards are
named; a worker paused past the record lock causes redeliveries that the ledger explains (still
valid). One run serves the faultless and the injected cases (a share run costs about 45 s here)."""

from __future__ import annotations

import json
import time

from confluent_kafka import Producer, ShareConsumer

from kchaos.clusters.clients import quiet
from kchaos.workloads.lineage import input_id, input_value

from .test_workload import Harness, _spec, wait_in_flight


def _share_spec(**overrides):
    base = dict(kind="share", records=1500, rate=500, workers=4, input_partitions=2, share_lock_duration_ms=15000,
                share_release_fraction=0.05, share_poison_fraction=0.02)
    base.update(overrides)
    return _spec(**base)


def test_faultless_share_run_is_valid_and_at_least_once_then_injected_anomalies_are_named(cluster3, tmp_path):
    # The Python checker: the Spark job names every share anomaly on hand-made share runs
    # (test_share_checks_spark.py), and reads real topics through Kafka in test_cli's end-to-end
    # run; here it would cost about a minute for a ledger both engines run on the driver
    h = Harness(cluster3, tmp_path, _share_spec())
    results = h.finish()
    assert results["verdict"] == "valid", json.dumps(results["checks"], indent=1)
    share = results["facts"]["share"]
    assert share["mode"] == "at-least-once" and share["kip1289"]["client_supports"] is False
    assert "KIP-1289" in share["kip1289"]["why"] or "share.version" in share["kip1289"]["why"]
    assert share["inputs_delivered"] == 1500 and share["released"] > 0
    assert share["poison_inputs"] == share["rejected"] > 0
    assert results["facts"]["outputs_committed"] == 2 * (1500 - share["poison_inputs"])
    configs = json.loads((h.run.path / "share_group.json").read_text())["group_configs"]
    assert configs["set"]["share.auto.offset.reset"] == "earliest"
    assert configs["set"]["share.isolation.level"] == "read_committed"
    assert configs["effective_delivery_count_limit"] >= 2
    acquirers = {op["process"] for op in h.ops() if op["f"] == "acquire"}
    assert len(acquirers) >= 2, acquirers
    _share_fetches_recorded_what_the_workers_were_given(cluster3, h)
    _injected_anomalies_are_named(cluster3, h)


def _share_fetches_recorded_what_the_workers_were_given(cluster3, h) -> None:
    """The shared cluster records every ShareFetch and its answer (cluster.record_apis): each
    record a worker says it acquired, at its delivery count, is in an acquired range of an answer
    the proxy delivered to a share consumer of the group."""
    from .test_message_faults import events_of

    fetches = [e for e in events_of(cluster3, "kchaos-record")
               if e["api"] == "ShareFetch" and e.get("group_id") == h.workload.spec.group_id]
    answered = [e for e in fetches if e["delivered"] and e["answer"]]
    assert answered and all("partitions" in e["answer"] for e in answered), fetches[:3]
    given = {(int(name.rsplit("-", 1)[1]), offset, count) for e in answered
             for name, part in e["answer"]["partitions"].items()
             for first, last, count in part["acquired"] for offset in range(first, last + 1)}
    acquired = {(p, o, d) for op in h.ops() if op["f"] == "acquire" for p, o, d in op["value"]["records"]}
    assert acquired and not acquired - given, sorted(acquired - given)[:10]


def test_worker_paused_past_the_record_lock_is_redelivered_and_explained(cluster3, tmp_path):
    h = Harness(cluster3, tmp_path, _share_spec(records=2500, rate=250, workers=3, process_delay_ms=400,
                                                share_release_fraction=0.0), engine="python")
    wait_in_flight(h, "w0", "send")  # w0 holds acquired records
    h.workload.pool.pause("w0", 22)  # past the 15 s lock: its records go back to the group
    results = h.finish(drain_s=180)
    assert results["verdict"] == "valid", json.dumps({k: v for k, v in results["checks"].items()}, indent=1)
    share = results["facts"]["share"]
    assert share["inputs_redelivered"] > 0, share
    redelivered = [op for op in h.ops() if op["f"] == "acquire"
                   and any(d > 1 for _, _, d in op["value"]["records"])]
    assert redelivered and all(op["process"] != "w0.1" or op["invoke_time"] > 0 for op in redelivered)


def _recheck(h) -> dict:
    """Final reads again, then the Python reader: the share ledger is one definition both engines
    run on the driver (verifier/share_checks.py)."""
    final = h.workload.final_reads(3)
    final["drained"] = True
    h.run.write_json("final.json", final)
    h.verify("python")
    return h.run.read_json("results.json")


def _one_more_input(cluster, h, index: int) -> None:
    p = Producer(quiet({**cluster.client_config(), "transactional.id": f"{h.workload.txid_prefix}-mutator"}))
    p.init_transactions(60)
    p.begin_transaction()
    p.produce(h.workload.spec.input_topic, key=input_id(99, index).encode(), value=input_value(99, index), partition=0)
    p.commit_transaction(60)


def _injected_anomalies_are_named(cluster3, h) -> None:
    # 1. an input nobody ever acknowledges: stuck
    _one_more_input(cluster3, h, 50_000)
    results = _recheck(h)
    assert results["anomaly_types"] == ["share-stuck-acquired"], results["checks"]
    # 2. the same input ACCEPTed by a consumer that wrote no outputs: lost
    consumer = ShareConsumer(quiet({**cluster3.client_config(), "group.id": h.workload.spec.group_id,
                                    "share.acknowledgement.mode": "explicit"}))
    consumer.subscribe([h.workload.spec.input_topic])
    deadline, accepted = time.monotonic() + 60, 0
    while not accepted and time.monotonic() < deadline:
        for m in consumer.poll(2):
            if m.error() is None:
                consumer.acknowledge(m)
                accepted += 1
        if accepted:
            consumer.commit_sync(30)
    consumer.close()
    assert accepted == 1
    results = _recheck(h)
    assert results["anomaly_types"] == ["share-lost"], results["checks"]
    assert results["anomalies"]["share-lost"][0]["persisted_state"] in ("acknowledged", "complete")
