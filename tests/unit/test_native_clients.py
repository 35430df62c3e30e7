"""The client workers' selection and config (workloads/native_clients.py), without a cluster: what
each client can express is checked on load, the properties a worker gets, and that a wheel ships
every source file of the workers."""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

import pytest
from pydantic import ValidationError

from kchaos.workloads.native_clients import CLIENTS, NATIVE_PRODUCER_DEFAULTS, SOURCES, worker_config
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


def test_what_a_client_cannot_speak_is_refused_on_load():
    with pytest.raises(ValidationError, match="does not speak group_protocol = 'consumer'"):
        WorkloadSpec(client="aiokafka", group_protocol="consumer")
    WorkloadSpec(client="franz-go", group_protocol="consumer")  # KIP-848
    with pytest.raises(ValidationError, match="transactional_id_strategy"):
        WorkloadSpec(client="kafkajs", transactional_id_strategy="per-partition")
    WorkloadSpec(client="sarama", transactional_id_strategy="per-partition")  # its example's producer per partition
    with pytest.raises(ValidationError, match="client_properties"):
        WorkloadSpec(client="sarama", client_properties={"java": {"producer": {"linger.ms": 5}}})


@pytest.mark.parametrize("delivery", ["at-least-once", "at-least-once-no-idempotence"])
def test_every_client_runs_the_negative_controls(delivery):
    for client in CLIENTS:
        assert WorkloadSpec(client=client, delivery=delivery).is_negative_control


def test_the_java_version_check_is_the_java_clients_alone():
    WorkloadSpec(client="franz-go", java_client_version="not-a-version")
    with pytest.raises(ValidationError, match="java_client_version"):
        WorkloadSpec(client="java", java_client_version="3.9.0")


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
