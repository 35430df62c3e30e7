"""The client workers' selection and config (workloads/native_clients.py), without a cluster: what
each client can express is checked on load, the properties a worker gets, and that a wheel ships
every source file of the workers."""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

import pytest
from pydantic import ValidationError

from kchaos.errors import ConfigError
from kchaos.harness.campaign import CAMPAIGNS_DIR, load_campaign
from kchaos.workloads.native_clients import CLIENTS, NATIVE_PRODUCER_DEFAULTS, SOURCES, not_honoured, worker_config
from kchaos.workloads.spec import WorkloadSpec

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_each_client_is_selectable_with_the_default_pipeline(client):
    spec = WorkloadSpec(client=client, consumer={"max.poll.interval.ms": 20000})
    assert spec.client_of(0) == client and spec.client_of(3) == client


def test_a_property_a_worker_does_not_map_is_refused_on_load():
    with pytest.raises(ValidationError, match=r"workload.producer.socket.timeout.ms: the franz-go worker does not map"):
        WorkloadSpec(client="franz-go", producer={"socket.timeout.ms": 3000})
    with pytest.raises(ValidationError, match="linger.ms"):  # KafkaJS has no linger
        WorkloadSpec(client="kafkajs", producer={"linger.ms": 5})
    with pytest.raises(ValidationError, match="delivery.timeout.ms: the aiokafka worker"):  # aiokafka has none
        WorkloadSpec(client="aiokafka", producer={"delivery.timeout.ms": 20000})


def test_what_a_client_cannot_speak_is_refused_on_load():
    with pytest.raises(ValidationError, match="it needs client = 'streams'"):
        WorkloadSpec(client="aiokafka", group_protocol="streams")
    WorkloadSpec(client="franz-go", group_protocol="consumer")  # KIP-848
    with pytest.raises(ValidationError, match="transactional_id_strategy"):
        WorkloadSpec(client="kafkajs", transactional_id_strategy="per-partition")
    WorkloadSpec(client="sarama", transactional_id_strategy="per-partition")  # its example's producer per partition


#: the workload of the default campaign of issue 59 (static members with a 30 s session, librdkafka's
#: message.timeout.ms in its own table), as every client must take it
DEFAULT_59 = {"static_membership": True, "session_timeout_ms": 30000, "transaction_timeout_ms": 30000,
              "producer": {"request.timeout.ms": 10000}, "consumer": {"max.poll.interval.ms": 30000},
              "client_properties": {"confluent": {"producer": {"message.timeout.ms": 20000}}}}


def _worker_config(spec: WorkloadSpec, worker: str = "w1") -> dict:
    return worker_config({"workload": spec.model_dump(mode="json"), "worker": worker})


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_every_client_takes_the_default_campaign_with_static_members(client):
    spec = WorkloadSpec(client=client, **DEFAULT_59)
    config = _worker_config(spec)
    # the confluent worker's own table is not given to another client's worker, and it says so
    assert config["properties"]["producer"] == {**{k: str(v) for k, v in CLIENTS[client].producer_defaults().items()},
                                                "request.timeout.ms": "10000"}
    assert config["properties"]["consumer"] == {"max.poll.interval.ms": "30000"}
    assert "workload.client_properties" in config["not_honoured"]


@pytest.mark.parametrize("client", sorted(c for c in CLIENTS if CLIENTS[c].instance_id_option))
def test_a_kip345_client_joins_as_the_slots_static_member(client):
    config = _worker_config(WorkloadSpec(client=client, static_membership=True, group_id="g"), "w2")
    assert config["group_instance_id"] == "g-w2"  # the name kchaos' own workers use (client_settings)
    assert config["not_honoured"] == {}
    dynamic = _worker_config(WorkloadSpec(client=client), "w2")
    assert dynamic["group_instance_id"] is None and dynamic["not_honoured"] == {}


def test_kafkajs_joins_as_a_dynamic_member_and_says_so():
    assert CLIENTS["kafkajs"].instance_id_option is None  # KafkaJS 2.2.4's consumer has no group instance id
    config = _worker_config(WorkloadSpec(client="kafkajs", static_membership=True))
    assert config["group_instance_id"] is None
    assert list(config["not_honoured"]) == ["workload.static_membership"]
    assert "dynamic member" in config["not_honoured"]["workload.static_membership"]
    assert not_honoured(WorkloadSpec(client="kafkajs").model_dump(mode="json")) == {}


def test_static_membership_is_still_refused_where_kchaos_names_no_member():
    with pytest.raises(ValidationError, match="static_membership"):
        WorkloadSpec(client="streams", static_membership=True)
    with pytest.raises(ValidationError, match="static_membership"):
        WorkloadSpec(static_membership=True, external_command=("my-app",), lineage="id", outputs_per_input=2)
    for client in ("confluent", "java", "mixed"):
        WorkloadSpec(client=client, static_membership=True)


def test_a_librdkafka_name_in_the_shared_table_is_still_refused():
    """message.timeout.ms belongs in client_properties.confluent: in workload.producer every worker
    would get it, and the other clients' workers have no such option."""
    with pytest.raises(ValidationError, match="workload.producer.message.timeout.ms: the sarama worker"):
        WorkloadSpec(client="sarama", **{**DEFAULT_59, "producer": {"message.timeout.ms": 20000}})


@pytest.mark.parametrize("name", ["default", "client-zombie", "client-at-least-once", "hunt-member-paused",
                                  "hunt-client-errors", "hunt-produce-answer-lost", "hunt-kip890",
                                  "hunt-produce-error"])
@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_every_client_loads_the_shipped_client_campaigns(client, name):
    campaign = load_campaign(CAMPAIGNS_DIR / f"{name}.toml", [f"workload.client={client}"])
    assert campaign.workload.client == client


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_the_undeliverable_outputs_hunt_loads_only_on_clients_with_a_delivery_timeout(client):
    """hunt-output-undeliverable sets delivery.timeout.ms: a client without one (aiokafka 0.14.0
    has no delivery_timeout_ms; sarama and KafkaJS count retries) refuses it on load, before any
    cluster starts, instead of its worker failing to start."""
    path = CAMPAIGNS_DIR / "hunt-output-undeliverable.toml"
    if "delivery.timeout.ms" in CLIENTS[client].producer_properties:
        assert load_campaign(path, [f"workload.client={client}"]).workload.client == client
    else:
        with pytest.raises(ConfigError, match=f"delivery.timeout.ms: the {client} worker does not map"):
            load_campaign(path, [f"workload.client={client}"])
    assert ("delivery.timeout.ms" in CLIENTS[client].producer_properties) == (client in ("franz-go", "kafka-python"))


@pytest.mark.parametrize("delivery", ["at-least-once", "at-least-once-no-idempotence"])
def test_every_client_runs_the_negative_controls(delivery):
    for client in CLIENTS:
        assert WorkloadSpec(client=client, delivery=delivery).is_negative_control


def test_the_java_version_check_is_the_java_clients_alone():
    WorkloadSpec(client="franz-go", java_client_version="not-a-version")
    with pytest.raises(ValidationError, match="java_client_version"):
        WorkloadSpec(client="java", java_client_version="2.8.2")
    WorkloadSpec(client="java", java_client_version="3.9.0")  # kafka-clients 3.x since issue 72
    with pytest.raises(ValidationError, match="java_client_version '3.9.0'"):  # Kafka Streams stays 4.0+
        WorkloadSpec(client="streams", java_client_version="3.9.0")


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_a_client_that_counts_its_retries_keeps_its_own_backoff_unless_the_campaign_sets_one(client):
    """sarama and KafkaJS give up after a number of retries: kchaos' 10 ms backoff would shrink their
    retry budget (KafkaJS's from about 9 s to 0.3 s, F12's condition). Time-bounded clients get it."""
    counted = client in ("sarama", "kafkajs")
    assert CLIENTS[client].counts_retries is counted
    plain = _worker_config(WorkloadSpec(client=client))["properties"]["producer"]
    assert ("retry.backoff.ms" in plain) is not counted
    if counted:
        assert plain == {"acks": "all", "linger.ms": "5"}
    pinned = _worker_config(WorkloadSpec(client=client, producer={"retry.backoff.ms": 10}))["properties"]["producer"]
    assert pinned["retry.backoff.ms"] == "10"


def test_a_worker_gets_kchaos_defaults_under_the_campaigns_properties_as_text():
    spec = WorkloadSpec(client="kafka-python", producer={"request.timeout.ms": 3000, "linger.ms": 20},
                        consumer={"max.poll.interval.ms": 20000})
    config = worker_config({"workload": spec.model_dump(mode="json"), "worker": "w0"})
    assert config["worker"] == "w0"
    assert config["properties"]["producer"] == {**{k: str(v) for k, v in NATIVE_PRODUCER_DEFAULTS.items()},
                                                "request.timeout.ms": "3000", "linger.ms": "20"}
    assert config["properties"]["consumer"] == {"max.poll.interval.ms": "20000"}


def test_a_wheel_ships_every_source_of_the_workers():
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["kchaos.workloads"]
    sources = [p.relative_to(ROOT / "workloads").as_posix() for p in SOURCES.rglob("*")
               if p.is_file() and "__pycache__" not in p.parts]
    assert sources
    # setuptools' globs do not cross a folder boundary with *
    unshipped = [s for s in sources if not any(fnmatch.fnmatch(s, pattern) and s.count("/") == pattern.count("/")
                                               for pattern in patterns)]
    assert unshipped == []
    for client in CLIENTS.values():
        entry = SOURCES / {"go": "go", "node": "node", "python": "python"}[client.toolchain] / client.entry
        assert entry.exists(), entry


def test_a_client_without_kip848_joins_a_classic_group_and_says_so():
    """The default campaign's KIP-848 group on a client that lacks it: the campaign loads, the worker
    joins a classic group and names what it ran without; franz-go speaks it."""
    spec = WorkloadSpec(client="sarama", group_protocol="consumer")
    missing = not_honoured(spec.model_dump(mode="json"))
    assert "KIP-848" in missing["workload.group_protocol"]
    assert "workload.group_protocol" not in not_honoured(
        WorkloadSpec(client="franz-go", group_protocol="consumer").model_dump(mode="json"))
