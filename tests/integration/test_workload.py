"""The consume-transform-produce workload on real brokers: history, client faults, negative controls."""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter

import pytest

from kchaos.faults.base import FaultContext
from kchaos.faults.nemesis import Nemesis
from kchaos.faults.schedule import ScheduledFault, write_schedule
from kchaos.faults.spec import PacingSpec
from kchaos.rundir import RunDir
from kchaos.verifier.campaign import load_recorded
from kchaos.verifier.outcome import Outcome
from kchaos.verifier.verdict import judge_run
from kchaos.workloads import make_workload
from kchaos.workloads.history import HistoryWriter, merge_history, pair_operations, read_lines
from kchaos.waiting import wait_until
from kchaos.workloads.spec import ObserverSpec, WorkloadSpec


def _spec(**overrides) -> WorkloadSpec:
    tag = uuid.uuid4().hex[:6]
    base = dict(input_topic=f"in-{tag}", output_topics=(f"inv-{tag}", f"ship-{tag}"), group_id=f"g-{tag}",
                records=2000, rate=1000, workers=2, input_partitions=4, abort_fraction=0.1,
                transaction_timeout_ms=10000, session_timeout_ms=10000, drain_timeout_s=120)
    base.update(overrides)
    return WorkloadSpec(**base)


class Harness:
    """A workload on the shared cluster with its own run directory, verified like `kchaos run` does."""

    def __init__(self, cluster, tmp_path, spec: WorkloadSpec, seed: int = 7, engine: str = "python",
                 observers: ObserverSpec | None = None):
        """``engine="spark"`` verifies with the Spark job reading the topics through Kafka (as
        `kchaos run` does); the Python checker alone is quicker for tests about the workload.
        ``observers``: readers of the topics throughout (none by default)."""
        self.cluster, self.engine = cluster, engine
        self.run = RunDir.create(tmp_path, "t", seed)
        (self.run.path / "seed").write_text(f"{seed}\n")
        observers = observers or ObserverSpec()
        self.run.write_json("campaign.json", {"workload": spec.model_dump(mode="json"), "verifier": {"engine": engine},
                                              "observers": observers.model_dump(mode="json")})
        self.history = HistoryWriter(self.run.path / "history" / "harness.jsonl", "harness")
        self.workload = make_workload(spec, cluster, self.run, seed, self.history, observers)
        self.workload.setup()
        self.workload.start()

    def finish(self, drain_s: float = 120, liveness_timeout_s: float | None = None,
               recover_hanging: bool = False) -> dict:
        try:
            drained = self.workload.drain(drain_s)
            self.workload.stop()
            final = self.workload.final_reads(liveness_timeout_s, recover_hanging)
            final["drained"] = drained
            self.run.write_json("final.json", final)
        finally:
            self.workload.close()
            self.history.close()
            merge_history(self.run.path / "history", self.run.path)
        self.verify()
        return self.run.read_json("results.json")

    def verify(self, engine: str | None = None) -> Outcome:
        engine = engine or self.engine
        return judge_run(self.run, load_recorded(self.run.path),
                         bootstrap=self.cluster.bootstrap_servers if engine == "spark" else None,
                         overrides={"engine": engine})

    def ops(self) -> list[dict]:
        return pair_operations(list(read_lines(self.run.path / "history.jsonl")))


def wait_for_history(h: Harness, pattern: str, predicate, timeout_s: float = 90) -> dict:
    """Block until a history line of the processes matching ``pattern`` (e.g. ``w0.*``)
    satisfies ``predicate``: tests wait on what the workload did, never on a fixed time."""
    history_dir = h.run.path / "history"

    def found():
        for path in history_dir.glob(f"{pattern}.jsonl"):
            for line in read_lines(path):
                if predicate(line):
                    return line
        return None

    return wait_until(found, timeout_s, 0.1, f"no history line of {pattern} as expected")


def committed(line: dict) -> bool:
    return line["f"] == "commit" and line["type"] == "ok"


def _events(ops, f):
    return [op for op in ops if op["f"] == f]


def wait_in_flight(h: Harness, slot: str, f: str, timeout_s: float = 60, hold_s: float = 0.1) -> dict:
    """Block until worker ``slot`` (its newest incarnation) has ``f`` invoked and not completed,
    still so after ``hold_s``: a client fault aimed then lands mid-operation, whatever the machine's
    speed, instead of at a fixed time that may fall before the worker has any work."""
    deadline = time.monotonic() + timeout_s
    history_dir = h.run.path / "history"
    while time.monotonic() < deadline:
        files = sorted(history_dir.glob(f"{slot}.*.jsonl"), key=lambda p: int(p.stem.split(".")[1]))
        lines = list(read_lines(files[-1])) if files else []
        if lines and lines[-1]["type"] == "invoke" and lines[-1]["f"] == f:
            last = lines[-1]
            time.sleep(hold_s)
            if list(read_lines(files[-1]))[-1] == last:
                return last
        time.sleep(0.02)
    raise AssertionError(f"{slot} never had {f!r} in flight within {timeout_s}s")


def test_faultless_run_processes_every_input_and_is_valid(cluster3, tmp_path):
    # The Python checker: the Spark job reading real topics through Kafka is test_cli's
    # end-to-end run of the default campaign (a Spark job costs about a minute here)
    h = Harness(cluster3, tmp_path, _spec())
    results = h.finish()
    assert results["verdict"] == "valid", json.dumps(results, indent=1)[:3000]
    facts = results["facts"]
    assert facts["inputs_committed"] == 2000
    assert facts["outputs_committed"] == 4000  # K=2 outputs per input, exactly once
    assert facts["transactions"]["committed"] > 0 and facts["transactions"].get("aborted", 0) > 0
    assert facts["outputs_raw"] > facts["outputs_committed"]  # the aborted ones are in the raw view only
    ops = h.ops()
    # every invoked operation completed (nothing was killed), and parses into the expected kinds
    assert all(op["outcome"] is not None for op in ops)
    kinds = Counter(op["f"] for op in ops)
    assert {"init", "poll", "send", "send_offsets", "commit", "abort", "seed", "assign"} <= set(kinds)
    inits = [op for op in _events(ops, "init") if op["process"] != "seeder"]
    assert all(op.get("pid") is not None and op.get("epoch") is not None for op in inits)
    assert (h.run.path / "history.parquet").exists()
    metrics = json.loads((h.run.path / "metrics.json").read_text())
    assert metrics["totals"]["inputs"] >= 2000 and metrics["totals"]["commit_p99_ms"] is not None


def test_worker_crash_and_pause_are_recorded_and_recovered(cluster3, tmp_path):
    h = Harness(cluster3, tmp_path, _spec(records=3000, rate=600))
    wait_for_history(h, "w0.*", committed)
    crashed = h.workload.pool.crash("w0")
    h.history.event("client-fault", {"kind": "crash", **crashed})
    wait_for_history(h, "w0.2", lambda line: line["f"] == "init" and line["type"] == "ok")  # restarted
    paused = h.workload.pool.pause("w1", 4)
    h.history.event("client-fault", {"kind": "pause", **paused})
    results = h.finish()
    assert results["verdict"] == "valid", json.dumps(results, indent=1)[:3000]
    ops = h.ops()
    exits = [op["value"] for op in _events(ops, "worker-exit")]
    assert any(e["slot"] == "w0" and e["incarnation"] == 1 and e["exit_code"] == -9 for e in exits)
    assert any(op["value"]["slot"] == "w0" and op["value"]["incarnation"] == 2 for op in _events(ops, "worker-restart"))
    # the killed incarnation may have died mid-operation: such an operation has no completion
    assert results["facts"]["inputs_committed"] == 3000 and results["facts"]["outputs_committed"] == 6000


def test_a_paced_fault_starts_on_a_working_pipeline_and_the_work_it_hit_is_measured(cluster3, tmp_path):
    """A latency fault paced by the work (faults.pacing, mode "recovery"): it starts once the
    pipeline commits, its pace decision is in the history, and the verifier measures what it
    overlapped (facts.exposure). A campaign that requires more than it hit makes the run unknown,
    naming the kind and the figure; one it meets stays valid."""
    h = Harness(cluster3, tmp_path, _spec(records=3000, rate=300))
    schedule = [ScheduledFault(0, 0.5, "latency", "all-clients", 3.0, 1, {"latency_ms": 100.0, "jitter_ms": 0.0})]
    write_schedule(h.run.path / "schedule.json", schedule, 7)
    nemesis = Nemesis(FaultContext(cluster3, h.workload), schedule, h.history,
                      pacing=PacingSpec(mode="recovery", window_s=1.0, max_wait_s=30))
    nemesis.start()
    try:
        wait_until(lambda: len(nemesis.executed) == 1, 90, 0.2, "the paced fault never ran")
    finally:
        nemesis.stop()
    results = h.finish()
    assert results["verdict"] == "valid", json.dumps(results, indent=1)[:3000]
    (pace,) = _events(h.ops(), "pace")
    assert pace["value"]["recovered"] is True and pace["value"]["rate"] > 0, pace
    latency = results["facts"]["exposure"]["kinds"]["latency"]
    assert latency["faults"] == 1 and latency["committed"] > 0 and latency["requests"]["commit"] > 0, latency
    campaign = h.run.read_json("campaign.json")
    for needed, verdict in ((latency["committed"], "valid"), (latency["committed"] + 1, "unknown")):
        h.run.write_json("campaign.json", {**campaign, "faults": {"exposure": {"committed": {"latency": needed}}}})
        judged = h.verify()
        assert judged.verdict == verdict, judged.errors
    assert any(f"latency: {latency['committed']} committed transactions overlapped its 1 windows, "
               f"{latency['committed'] + 1} required" in e for e in judged.errors), judged.errors


def test_zombie_past_the_transaction_timeout_is_fenced(cluster3, tmp_path):
    # Input keeps flowing for ~20 s, well past the zombie's resumption, so it must try to write again.
    h = Harness(cluster3, tmp_path, _spec(records=7000, rate=300, transaction_timeout_ms=5000))
    wait_for_history(h, "w0.*", committed)
    info = h.workload.pool.zombie("w0", pause_s=8, overlap_s=5)
    h.history.event("client-fault", {"kind": "zombie", **info})
    results = h.finish()
    assert results["verdict"] == "valid", json.dumps(results, indent=1)[:3000]
    ops = h.ops()
    zombie = f"w0.{info['zombie_incarnation']}"
    exits = {op["value"]["incarnation"]: op["value"] for op in _events(ops, "worker-exit") if op["value"]["slot"] == "w0"}
    assert exits[info["zombie_incarnation"]]["exit_code"] == 10, exits  # fenced
    assert any(op["process"] == zombie for op in _events(ops, "fenced"))
    # the replacement used the same transactional.id with a higher epoch
    inits = {op["process"]: op for op in _events(ops, "init") if op["process"].startswith("w0.")}
    new = inits[f"w0.{info['replacement_incarnation']}"]
    assert new["txid"] == inits[zombie]["txid"] and new["epoch"] > inits[zombie]["epoch"]


# Back in the CI tier: the duplicate once seen here at the group's first rebalance was the
# worker's, an input held across a rebalance (docs/findings.md F2), fixed.
#
# The old instance is fenced only by a transaction it begins after the new one's InitProducerId,
# so input must still be arriving then: 16 s of it. With 6 s (3000 at 500/s) a loaded CI machine
# started the new instance 2.5 s late, the old one drained every input first and was never fenced
# (CI 2026-11-27). The test checks that precondition rather than fail on its symptom.
def test_transactional_id_takeover_fences_the_old_instance(cluster3, tmp_path):
    h = Harness(cluster3, tmp_path, _spec(records=4000, rate=250))
    wait_for_history(h, "w1.*", committed)
    info = h.workload.pool.takeover("w1")
    results = h.finish()
    assert results["verdict"] == "valid", json.dumps(results, indent=1)[:3000]
    new_init = next(op for op in _events(h.ops(), "init") if op["process"] == f"w1.{info['new_incarnation']}")
    last_seed = max(op["invoke_time"] for op in _events(h.ops(), "seed"))
    assert new_init["complete_time"] < last_seed, "the input ended before the new instance's InitProducerId: nothing could fence the old one"
    exits = {op["value"]["incarnation"]: op["value"] for op in _events(h.ops(), "worker-exit") if op["value"]["slot"] == "w1"}
    assert exits[info["old_incarnation"]]["exit_code"] == 10


def test_a_fenced_worker_producer_flush_raises_the_fence(cluster3):
    """The worker's producer logs through Python; confluent-kafka's flush() then raised SystemError
    instead of the fence (the worker exited "crashed", CI 2026-11-24). With a plain Producer this
    test sees the SystemError."""
    import logging

    from confluent_kafka import KafkaException, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from kchaos.workloads.ctp_worker import FENCED_CODES, LoggedProducer

    tag = uuid.uuid4().hex[:6]
    topic, txid, conf = f"fence-{tag}", f"fence-{tag}-tx", cluster3.client_config()
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(topic, 3, 3)])[topic].result(30)
    logger = logging.getLogger(f"rdkafka.{txid}")
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    logger.addHandler(logging.NullHandler())
    zombie = LoggedProducer({**conf, "transactional.id": txid, "debug": "eos", "log_level": 7, "logger": logger})
    zombie.init_transactions(30)
    zombie.begin_transaction()
    for i in range(30):
        zombie.produce(topic, value=b"before", partition=i % 3)
    assert zombie.flush(30) == 0
    Producer({**conf, "transactional.id": txid, "log_level": 3}).init_transactions(30)  # the new instance
    for i in range(30):
        zombie.produce(topic, value=b"after", partition=i % 3)
    with pytest.raises(KafkaException) as raised:
        for _ in range(3):  # the fence comes back with the first produce request, within seconds
            zombie.flush(10)
    assert raised.value.args[0].code() in FENCED_CODES, raised.value


@pytest.mark.long  # a transactional.id strategy, not a check or a fault kind
def test_per_partition_transactional_ids(cluster3, tmp_path):
    spec = _spec(transactional_id_strategy="per-partition", workers=2, input_partitions=3)
    h = Harness(cluster3, tmp_path, spec)
    results = h.finish()
    assert results["verdict"] == "valid", json.dumps(results, indent=1)[:3000]
    txids = {op["txid"] for op in _events(h.ops(), "commit")}
    assert txids == {f"{h.workload.txid_prefix}-{spec.input_topic}-{p}" for p in range(3)}


def test_read_uncommitted_negative_control_is_caught(cluster3, tmp_path):
    # The seeder aborts ~20% of its input transactions; a read_uncommitted pipeline processes them.
    # the Python checker: the Spark job names an aborted read on real topics in test_mutations.py
    h = Harness(cluster3, tmp_path, _spec(isolation="read_uncommitted"))
    h.workload.seeder.abort_fraction = 0.2
    results = h.finish()
    assert results["verdict"] == "invalid"
    assert "aborted-read" in results["anomaly_types"]
    case = results["anomalies"]["aborted-read"][0]
    assert case["records"][0]["in_offset"] >= 0 and case["transactions"][0]["txid"]


@pytest.mark.parametrize("delivery", ["at-least-once",
                                      pytest.param("at-least-once-no-idempotence", marks=pytest.mark.long)])
def test_at_least_once_negative_controls_run_and_are_caught_under_crashes(cluster3, tmp_path, delivery):
    # A backlog keeps the workers busy, so that a crash lands between "outputs written" and
    # "offsets committed" (most of an at-least-once cycle); that work is then redone.
    # process_delay_ms widens the window as a real transform would.
    h = Harness(cluster3, tmp_path, _spec(delivery=delivery, records=10000, rate=20000, max_batch=200,
                                          process_delay_ms=300, abort_fraction=0, restart_backoff_s=0.2))
    # w0 stopped past its session timeout mid-batch and w1 killed mid-batch (outputs produced, the
    # offsets not yet committed): the restarted w1 gets every partition and redoes both batches.
    wait_in_flight(h, "w0", "send")
    h.workload.pool.suspend("w0")
    wait_in_flight(h, "w1", "send")
    h.workload.pool.crash("w1")
    # w0 is suspended past its session timeout: wait until the restarted w1 owns every partition
    wait_for_history(h, "w1.2", lambda line: line["f"] == "assign" and len(line["value"]["partitions"]) == 4, 60)
    h.workload.pool.resume_all()
    results = h.finish()
    assert results["facts"]["inputs_committed"] == 10000
    assert results["verdict"] == "invalid", json.dumps(results["checks"], indent=1)
    assert "duplicate" in results["anomaly_types"]


def test_bring_your_own_pipeline_runs_and_is_verified_by_lineage(cluster3, tmp_path):
    """An external command as the transform app: it gets only the KCHAOS_* environment."""
    import sys

    h = Harness(cluster3, tmp_path, _spec(external_command=(sys.executable, "-m", "kchaos.workloads.ctp_worker")))
    results = h.finish()
    assert results["verdict"] == "valid", json.dumps(results, indent=1)[:3000]
    assert results["facts"]["outputs_committed"] == 4000
    starts = _events(h.ops(), "worker-start")
    assert len(starts) == 2
    assert list((h.run.path / "workers" / "pids").glob("*.pid")) == []  # stopped and forgotten


# the valid halves run in the long tier (and the nightly runs byo-copier, an outside app, VALID):
# the CI tier keeps the half that must be caught; it grew past 29 minutes with both
@pytest.mark.parametrize("mode,verdict", [pytest.param("safe", "valid", marks=pytest.mark.long), ("unsafe", "invalid")])
def test_an_outside_app_is_judged_from_the_broker_side(cluster3, tmp_path, mode, verdict):
    """An app written outside kchaos (tests/apps/outside_pipeline.py: no history, only the
    lineage contract), each instance crashed right after a commit: offsets sent in the
    transaction make it valid, its progress counted in the coordinator's log; offsets committed
    after the transaction make it a duplicate."""
    import sys
    from pathlib import Path

    app = (sys.executable, str(Path(__file__).resolve().parents[1] / "apps" / "outside_pipeline.py"), mode)
    h = Harness(cluster3, tmp_path, _spec(external_command=app, records=3000, rate=20000, abort_fraction=0,
                                          restart_backoff_s=0.2))
    for slot in ("w0", "w1"):
        log = h.run.path / "workers" / f"{slot}.1.log"
        wait_until(lambda: log.exists() and "committed" in log.read_text(), 90, 0.02, f"{slot} never committed")
        h.workload.pool.crash(slot)  # inside the 300 ms after a commit: offsets not yet committed if unsafe
    results = h.finish()
    assert results["verdict"] == verdict, json.dumps(results["checks"], indent=1)
    assert results["facts"]["inputs_committed"] == 3000
    if mode == "safe":
        assert "coordinator's log" in results["checks"]["no-progress"]["note"]
    else:
        assert "duplicate" in results["anomaly_types"]


@pytest.mark.parametrize("mode,verdict", [pytest.param("copy", "valid", marks=pytest.mark.long),
                                          ("copy-uncommitted", "invalid")])
def test_an_unmodified_app_is_verified_by_identity_lineage(cluster3, tmp_path, mode, verdict):
    """An app that writes no lineage, only copies each input unchanged to every output topic:
    outputs are traced by the id in their value (identity lineage), across an instance crash.
    Reading read_uncommitted, it copies the seeder's aborted input copies, whose marked ids name
    the aborted read."""
    import sys
    from pathlib import Path

    app = (sys.executable, str(Path(__file__).resolve().parents[1] / "apps" / "outside_pipeline.py"), mode)
    h = Harness(cluster3, tmp_path, _spec(external_command=app, lineage="id", lineage_id="json:/id", records=3000,
                                          rate=3000, abort_fraction=0, seed_abort_fraction=0.2, restart_backoff_s=0.2))
    log = h.run.path / "workers" / "w0.1.log"
    wait_until(lambda: log.exists() and "committed" in log.read_text(), 90, 0.02, "w0 never committed")
    h.workload.pool.crash("w0")
    results = h.finish()
    assert results["verdict"] == verdict, json.dumps(results["checks"], indent=1)
    assert results["facts"]["inputs_committed"] == 3000
    assert "torn-transaction (per transaction)" in results["not_checked"]
    if mode == "copy":
        assert results["facts"]["outputs_committed"] == 6000
        assert "coordinator's log" in results["checks"]["no-progress"]["note"]
    else:
        assert results["anomaly_types"] == ["aborted-read"]
        assert "~aborted" in results["anomalies"]["aborted-read"][0]["input"]["id"]


def test_external_backend_drives_an_existing_cluster(cluster3, tmp_path):
    """The external backend against a cluster it does not own: look-ups work, node faults are refused."""
    from kchaos.clusters import Capability, ClusterSpec, create_cluster
    from kchaos.errors import CapabilityError

    ext = create_cluster(ClusterSpec.load({"backend": "external",
                                           "external": {"bootstrap_servers": cluster3.bootstrap_servers}}), tmp_path)
    ext.start()
    try:
        assert sorted(n.node_id for n in ext.nodes) == [1, 2, 3]
        assert ext.active_controller() == cluster3.active_controller()
        with pytest.raises(CapabilityError, match="external backend cannot kill"):
            ext.require(Capability.KILL)
        with pytest.raises(CapabilityError):
            ext.nodes[0].kill()
        h = Harness(ext, tmp_path / "w", _spec(records=1000))
        assert h.finish()["verdict"] == "valid"
    finally:
        ext.stop()


def test_campaign_client_properties_reach_the_workers_clients(cluster3, tmp_path):
    """[workload.producer] and [workload.consumer] read back from the brokers: the producer's
    compression.type is in the output topic's log (DumpLogSegments on the segment files), the
    consumer's partition.assignment.strategy is the assignor the group coordinator reports; and
    the members carry the client ids kchaos gives each worker (message faults aim by them)."""
    from confluent_kafka.admin import AdminClient

    from kchaos.runtime.kafka_tools import run_tool
    from kchaos.waiting import wait_until

    spec = _spec(records=400, abort_fraction=0.0, producer={"compression.type": "gzip"},
                 consumer={"partition.assignment.strategy": "roundrobin"})
    h = Harness(cluster3, tmp_path, spec)
    admin = AdminClient(cluster3.client_config())

    def group_when_stable():
        group = admin.describe_consumer_groups([spec.group_id])[spec.group_id].result(10)
        return group if len(group.members) == spec.workers and group.partition_assignor else None

    group = wait_until(group_when_stable, 60, 0.5, "the group never had every worker", retry_on=(Exception,))
    assert group.partition_assignor == "roundrobin"  # librdkafka's default list picks "range"
    assert {m.client_id for m in group.members} == {f"kchaos-w{i}-consumer" for i in range(spec.workers)}
    results = h.finish()
    assert results["verdict"] == "valid", json.dumps(results["checks"], indent=1)
    segments = [str(p) for node in cluster3.nodes for p in node.data_dir.glob(f"{spec.output_topics[0]}-*/*.log")]
    out = run_tool("dump-log", ["--files", ",".join(segments)], cluster3.kafka_version).stdout
    codecs = {line.split("compresscodec: ")[1].split()[0] for line in out.splitlines() if "compresscodec: " in line
              and "isTransactional: true" in line and "isControl: false" in line}
    assert codecs == {"gzip"}, codecs
