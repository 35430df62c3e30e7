"""Issue 72, item 1 ("a fleet, not a client"), on hand-made data: the client registry
(workloads/registry.py: releases, labels, what each supports by release), ``[[workload.fleet]]``
and its refusals on load, what each slot runs and what a run says it ran. No cluster, no build:
the builds for a release and the real brokers are tests/integration's (test_java_client.py)."""

from __future__ import annotations

import importlib.metadata
import json
import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from kchaos.ci.release_table import client_of as release_client
from kchaos.errors import ConfigError
from kchaos.harness.campaign import CAMPAIGNS_DIR, load_campaign
from kchaos.harness.run import environment
from kchaos.reports.what_ran import workers_client
from kchaos.rundir import RunDir
from kchaos.verifier.verdict import run_block
from kchaos.workloads import registry
from kchaos.workloads.history import HistoryWriter
from kchaos.workloads.java_client import worker_properties
from kchaos.workloads.native_clients import CLIENTS as NATIVE, PYTHON_REQUIREMENTS, SOURCES, worker_config
from kchaos.workloads.pool import WorkerPool
from kchaos.workloads.registry import label, speaks_tv2
from kchaos.workloads.spec import WorkloadSpec

CONFLUENT = importlib.metadata.version("confluent-kafka")

#: the issue's example: two Java 4.2.1 slots, two franz-go slots at the registry's default
BRIEF = {"group_protocol": "consumer",
         "fleet": [{"client": "java", "version": "4.2.1", "workers": 2}, {"client": "franz-go", "workers": 2}]}


# -- the registry ---------------------------------------------------------------------------------
@pytest.mark.parametrize("client, version, tv2", [
    ("java", None, True), ("java", "4.0.0", True), ("java", "3.9.1", False), ("java", "3.0.0", False),
    ("streams", "4.2.1", True), ("franz-go", None, True), ("franz-go", "1.19.0", True),
    ("franz-go", "1.18.0", False), ("confluent", None, False), ("sarama", None, False),
    ("aiokafka", None, False), ("kafka-python", None, False), ("kafkajs", None, False), ("app", None, False),
])
def test_speaks_tv2_by_client_and_release(client, version, tv2):
    assert speaks_tv2(client, version) is tv2


def test_labels_name_the_client_and_the_release_or_the_default():
    assert label("java", "4.2.1") == "java 4.2.1" and label("java") == "java 4.2.1"
    assert label("franz-go", None) == f"franz-go {NATIVE['franz-go'].pinned}" == "franz-go 1.22.3"
    assert label("confluent") == f"confluent {CONFLUENT}"  # the confluent-kafka installed
    assert label("sarama", "v1.45.0") == "sarama 1.45.0"  # a Go tag's v is dropped
    assert label("app") == "app"


def test_the_registry_says_what_each_client_supports_by_release():
    assert registry.supports("java", "kip848", "4.0.0") and not registry.supports("java", "kip848", "3.9.1")
    assert registry.supports("franz-go", "kip848", "1.22.0") and not registry.supports("franz-go", "kip848", "1.21.7")
    assert registry.supports("sarama", "kip447", "1.60.0") and not registry.supports("sarama", "kip447", "1.59.0")
    assert registry.supports("kafka-python", "kip447") and not registry.supports("aiokafka", "kip447")
    assert not registry.supports("kafkajs", "kip345") and registry.supports("aiokafka", "kip345")
    assert all(not registry.supports(c, "kip890") for c in ("confluent", "sarama", "aiokafka", "kafka-python",
                                                                "kafkajs"))
    assert registry.group_protocol_of("java", "3.9.1", "consumer") == "classic"
    assert registry.group_protocol_of("java", "4.2.1", "consumer") == "consumer"
    assert registry.group_protocol_of("java", "3.9.1", "classic") == "classic"


@pytest.mark.parametrize("client, version, message", [
    ("java", "2.8.2", "runs on 3.0.0 or later"), ("java", "4.2", "not a release number"),
    ("kafkajs", "3.0.0", "written for releases before 3.0.0"), ("kafkajs", "2.0.0", "runs on 2.1.0 or later"),
    ("sarama", "1.38.1", "runs on 1.40.0 or later"),
    ("confluent", "2.10.0", "the confluent-kafka installed"), ("streams", "3.9.1", "4.0.0 or later"),
])
def test_a_release_the_registry_cannot_build_is_refused_in_one_line(client, version, message):
    with pytest.raises(ValueError, match=re.escape(message)) as err:
        registry.check_version(client, version)
    assert "\n" not in str(err.value)


def test_the_defaults_are_the_pins_of_the_default_builds():
    go_mod = (SOURCES / "go" / "go.mod").read_text()
    for name in ("franz-go", "sarama"):
        assert f"{NATIVE[name].package} v{registry.default_version(name)}\n" in go_mod
    package = json.loads((SOURCES / "node" / "package.json").read_text())
    assert package["dependencies"] == {"kafkajs": registry.default_version("kafkajs")}
    assert set(PYTHON_REQUIREMENTS) == {f"{n}=={registry.default_version(n)}" for n in ("aiokafka", "kafka-python")}
    assert registry.default_version("java") == WorkloadSpec().java_client_version
    assert registry.default_version("confluent") == CONFLUENT


def test_a_go_release_without_a_feature_is_built_with_the_tag_its_shim_needs():
    assert registry.go_tags("franz-go", "1.21.7") == ("kchaos_no_kip848",) and registry.go_tags("franz-go", None) == ()
    assert registry.go_tags("sarama", "1.45.0") == ("kchaos_no_kip447",) and registry.go_tags("sarama", None) == ()
    for tag, package in (("kchaos_no_kip848", "franzgo"), ("kchaos_no_kip447", "sarama")):
        sources = {p.name: p.read_text() for p in (SOURCES / "go" / package).glob("kip*.go")}
        assert sum(f"//go:build {tag}" in text for text in sources.values()) == 1, sources.keys()
        assert sum(f"//go:build !{tag}" in text for text in sources.values()) == 1, sources.keys()


# -- [[workload.fleet]] ---------------------------------------------------------------------------
def test_the_issues_fleet_loads_its_slots_in_fleet_order():
    spec = WorkloadSpec.model_validate(BRIEF)
    assert spec.client == "fleet" and spec.workers == 4  # both derived
    assert [spec.client_of(i) for i in range(4)] == ["java", "java", "franz-go", "franz-go"]
    assert [spec.client_version_of(i) for i in range(4)] == ["4.2.1", "4.2.1", "1.22.3", "1.22.3"]
    assert [spec.label_of(i) for i in range(4)] == ["java 4.2.1"] * 2 + ["franz-go 1.22.3"] * 2
    assert [(s.label, slots) for s, slots in spec.fleet_groups()] == [("java 4.2.1", ["w0", "w1"]),
                                                                      ("franz-go 1.22.3", ["w2", "w3"])]
    # the recorded spec (campaign.json) loads again as itself
    assert WorkloadSpec.model_validate(spec.model_dump(mode="json")) == spec


def test_a_fleet_from_a_campaign_file_and_its_refusals_exit_3(tmp_path):
    path = tmp_path / "fleet.toml"
    path.write_text('extends = "certify-tv-flip"\nname = "ours"\n\n'
                    '[[workload.fleet]]\nclient = "java"\nversion = "3.9.1"\nworkers = 1\n\n'
                    '[[workload.fleet]]\nclient = "java"\nversion = "4.1.1"\n\n'
                    '[[workload.fleet]]\nclient = "franz-go"\nworkers = 2\n')
    workload = load_campaign(path).workload
    assert [s.label for s in workload.slot_clients()] == ["java 3.9.1", "java 4.1.1", "franz-go 1.22.3",
                                                          "franz-go 1.22.3"]
    # KIP-848's group: java 3.9.1 (no KIP-848) joins through the classic protocol, the others not
    assert [workload.group_protocol_of(i) for i in range(4)] == ["classic", "consumer", "consumer", "consumer"]
    for bad, message in (("workload.workers=3", "the fleet's entries have 4 worker slots"),
                         ('workload.fleet=[{client="java",version="2.8.2"}]', "runs on 3.0.0 or later"),
                         ('workload.fleet=[{client="streams"}]', "a fleet slot runs one of"),
                         ('workload.fleet=[{client="java",colour="red"}]', "colour"),
                         ("workload.client=java", "it needs client = 'fleet'")):
        with pytest.raises(ConfigError, match=re.escape(message)) as err:
            load_campaign(path, [bad])
        assert "\n" not in str(err.value), bad


def test_workers_may_be_given_when_they_agree():
    assert WorkloadSpec.model_validate({**BRIEF, "workers": 4}).workers == 4
    with pytest.raises(ValidationError, match="workload.workers = 5"):
        WorkloadSpec.model_validate({**BRIEF, "workers": 5})
    with pytest.raises(ValidationError, match="needs \\[\\[workload.fleet\\]\\] entries"):
        WorkloadSpec(client="fleet")


def test_what_a_slots_client_cannot_do_is_refused_per_slot():
    fleet = [{"client": "java"}, {"client": "sarama"}]
    with pytest.raises(ValidationError, match=re.escape("workload.fleet[1] (sarama): workload.producer.delivery."
                                                        "timeout.ms: the sarama worker does not map")):
        WorkloadSpec.model_validate({"fleet": fleet, "producer": {"delivery.timeout.ms": 10000}})
    with pytest.raises(ValidationError, match=re.escape("workload.fleet[0] (java): the Java driver runs the "
                                                        "exactly-once")):
        WorkloadSpec.model_validate({"fleet": fleet, "delivery": "at-least-once"})
    with pytest.raises(ValidationError, match="transactional_id_strategy"):  # per-partition ids: sarama's alone
        WorkloadSpec.model_validate({"fleet": [{"client": "sarama"}, {"client": "kafka-python"}],
                                     "transactional_id_strategy": "per-partition"})
    WorkloadSpec.model_validate({"fleet": [{"client": "sarama", "workers": 2}],
                                 "transactional_id_strategy": "per-partition"})
    with pytest.raises(ValidationError, match="kafka-python 2.2.15: kchaos' worker on kafka-python runs on 3.0.0"):
        WorkloadSpec.model_validate({"fleet": [{"client": "kafka-python", "version": "2.2.15"}]})


def test_slots_share_one_group_only_where_their_protocols_allow():
    java_franz = {"fleet": [{"client": "java"}, {"client": "franz-go"}]}
    with pytest.raises(ValidationError, match="cannot share one classic consumer group.*cooperative-sticky"):
        WorkloadSpec.model_validate(java_franz)  # range/roundrobin against franz-go's cooperative-sticky
    WorkloadSpec.model_validate({**java_franz, "group_protocol": "consumer"})  # the broker assigns
    # under KIP-848 the classic joiners must still meet: franz-go 1.21.7 has no KIP-848 opt-in
    with pytest.raises(ValidationError, match="no KIP-848 join through the classic protocol"):
        WorkloadSpec.model_validate({"group_protocol": "consumer", "fleet": [
            {"client": "java", "version": "3.9.1"}, {"client": "franz-go", "version": "1.21.7"}]})
    # librdkafka, Java 3.x, sarama (range) and aiokafka (roundrobin) pairwise
    WorkloadSpec.model_validate({"fleet": [{"client": "confluent"}, {"client": "java", "version": "3.9.1"},
                                           {"client": "sarama"}]})
    with pytest.raises(ValidationError, match="sarama 1.61.1 offers range; aiokafka 0.14.0 offers roundrobin"):
        WorkloadSpec.model_validate({"fleet": [{"client": "sarama"}, {"client": "aiokafka"}]})
    with pytest.raises(ValidationError, match="RoundRobinAssigner"):  # KafkaJS's assigner is its own
        WorkloadSpec.model_validate({"fleet": [{"client": "java"}, {"client": "kafkajs"}]})
    WorkloadSpec.model_validate({"group_protocol": "consumer", "fleet": [{"client": "java"}, {"client": "kafkajs"}]})


def test_mixed_is_a_fleet_of_confluent_and_java_alternating():
    spec = WorkloadSpec(client="mixed", workers=4, java_client_version="3.9.1")
    assert [s.label for s in spec.slot_clients()] == [f"confluent {CONFLUENT}", "java 3.9.1"] * 2
    assert [slots for _, slots in spec.fleet_groups()] == [["w0", "w2"], ["w1", "w3"]]


def test_a_single_clients_release_is_client_version():
    spec = WorkloadSpec(client="sarama", client_version="1.45.0")
    assert spec.slot_client(2).label == "sarama 1.45.0" and spec.client_of(2) == "sarama"
    with pytest.raises(ValidationError, match="the Java client's and Kafka Streams' release is java_client_version"):
        WorkloadSpec(client="java", client_version="4.1.1")
    with pytest.raises(ValidationError, match="a fleet names each entry's version"):
        WorkloadSpec.model_validate({**BRIEF, "client_version": "1.0.0"})
    with pytest.raises(ValidationError, match="aiokafka 0.10.0: kchaos' worker on aiokafka runs on 0.11.0"):
        WorkloadSpec(client="aiokafka", client_version="0.10.0")


def test_the_shipped_fleets_load():
    safe = load_campaign(CAMPAIGNS_DIR / "certify-tv-flip.toml").workload
    assert [s.label for s, _ in safe.fleet_groups()] == ["java 4.2.1", "franz-go 1.22.3"]
    exposed = load_campaign(CAMPAIGNS_DIR / "certify-tv-flip-exposed.toml").workload
    assert [s.label for s, _ in exposed.fleet_groups()] == [f"confluent {CONFLUENT}", "java 3.9.1"]


# -- what each slot is given -------------------------------------------------------------------
def test_each_slot_starts_with_its_own_client_release_and_group_protocol(tmp_path):
    def pool(fleet: list[dict]) -> WorkerPool:
        spec = WorkloadSpec.model_validate({"group_protocol": "consumer", "fleet": fleet})
        return WorkerPool(spec, {"bootstrap.servers": "x:9092"}, tmp_path, 1, "kc",
                          HistoryWriter(tmp_path / "h.jsonl", "harness"))

    java = pool([{"client": "java", "version": "3.9.1"}, {"client": "java", "version": "4.2.1"}, {"client": "franz-go"}])
    info = {name: java.slot_info(name) for name in java.slots}
    assert info["w0"] == {"client": "java", "version": "3.9.1", "label": "java 3.9.1", "group_protocol": "classic"}
    assert info["w1"]["group_protocol"] == "consumer" and info["w2"]["label"] == "franz-go 1.22.3"
    base = {"workload": java.spec.model_dump(mode="json"), "incarnation": 1, "seed": 1, "txid_prefix": "kc",
            "client": {"bootstrap.servers": "x:9092"}, "history_path": "/h.jsonl"}
    props = {slot: worker_properties({**base, "worker": slot, "slot": info[slot]}) for slot in ("w0", "w1")}
    assert "kchaos.group.protocol=classic" in props["w0"] and "kchaos.group.protocol=consumer" in props["w1"]
    franz = pool([{"client": "java"}, {"client": "franz-go", "version": "1.21.7"}, {"client": "franz-go"}])
    base["workload"] = franz.spec.model_dump(mode="json")
    old, new = (worker_config({**base, "worker": slot, "slot": franz.slot_info(slot)}) for slot in ("w1", "w2"))
    assert "franz-go 1.21.7 has no KIP-848" in old["not_honoured"]["workload.group_protocol"]
    assert "workload.group_protocol" not in new["not_honoured"]


# -- what a run says it ran ----------------------------------------------------------------------
def test_a_fleet_run_reports_every_client_and_release_it_ran(tmp_path):
    campaign = load_campaign(CAMPAIGNS_DIR / "certify-tv-flip-exposed.toml")
    env = environment(campaign)
    assert [(g["label"], g["slots"]) for g in env["fleet"]] == [(f"confluent {CONFLUENT}", ["w0", "w1"]),
                                                                 ("java 3.9.1", ["w2", "w3"])]
    assert env["workers"].endswith("; Java kafka-clients 3.9.1 (w2, w3)")
    path = tmp_path / "20261201T000000Z-x-seed1"
    path.mkdir()
    run = RunDir(path)
    run.write_json("environment.json", env)
    block = run_block(run, campaign, [], 0, "python")
    assert block["clients"][1] == "Java kafka-clients 3.9.1" and block["clients"][0].startswith("confluent-kafka")
    assert [f["label"] for f in block["fleet"]] == [f"confluent {CONFLUENT}", "java 3.9.1"]
    assert release_client(campaign.workload.model_dump(mode="json"), env) == f"confluent {CONFLUENT} + java 3.9.1"
    # a fleet run recorded without the environment's fleet: the campaign's entries
    assert release_client(campaign.workload.model_dump(mode="json"), {}) == "confluent + java 3.9.1"


def test_the_workers_line_names_each_client_and_its_slots():
    line = workers_client(WorkloadSpec.model_validate(BRIEF), "confluent-kafka X")
    assert line == ("Java kafka-clients 4.2.1 (w0, w1); franz-go 1.22.3 (w2, w3: kchaos' worker on that client, "
                    "docs/clients.md)")
    assert workers_client(WorkloadSpec(client="kafkajs", client_version="2.1.0"), "c") == \
        "kafkajs 2.1.0 (kchaos' worker on that client, docs/clients.md)"
    assert workers_client(WorkloadSpec(client="java", java_client_version="3.9.1"), "c") == "Java kafka-clients 3.9.1"


def test_the_plan_names_what_each_slot_runs_without():
    from kchaos.cli.plan import plan, render_plan
    from kchaos.faults.schedule import generate_schedule

    campaign = load_campaign(CAMPAIGNS_DIR / "certify-tv-flip.toml", [
        'workload.fleet=[{client="java",version="3.9.1"},{client="kafka-python",workers=2},{client="franz-go"}]'])
    text = render_plan(plan(campaign, 1, False, generate_schedule(campaign.faults, campaign.run.duration_s, 1)))
    assert "java 3.9.1 (w0): without workload.group_protocol" in text
    assert "kafka-python 3.0.12 (w1, w2): without workload.group_protocol" in text
    assert "franz-go 1.22.3 (w3): without workload.group_protocol" not in text


def test_a_fleet_slot_cannot_be_a_user_app_or_a_share_worker():
    with pytest.raises(ValidationError, match="client = 'fleet' runs kchaos' own workers"):
        WorkloadSpec.model_validate({**BRIEF, "kind": "share"})


def test_the_docs_describe_the_fleet_and_every_version_rule():
    text = (Path(__file__).resolve().parents[2] / "docs" / "clients.md").read_text()
    assert "## Fleets" in text and "## Versions" in text
    for name, d in registry.CLIENTS.items():
        if d.in_fleet and d.build != "installed":
            assert f"| `{name}` |" in text[text.index("## Versions"):], name
