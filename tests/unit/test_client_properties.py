"""[workload.producer] / [workload.consumer]: what reaches the clients, what is refused on load."""

from __future__ import annotations

import pytest

from kchaos.errors import ConfigError
from kchaos.harness.campaign import load_campaign
from kchaos.workloads.client_settings import (CONFLUENT_PRODUCER, OWNED_CONSUMER, OWNED_PRODUCER,
                                              confluent_producer_conf)
from kchaos.workloads.java_client import worker_properties
from kchaos.workloads.spec import WorkloadSpec

JEPSEN = ["workload.producer.request.timeout.ms=3000", "workload.producer.delivery.timeout.ms=10000",
          "workload.producer.socket.connection.setup.timeout.ms=1000"]


def test_campaign_properties_load_through_set_as_single_dotted_names():
    campaign = load_campaign(None, JEPSEN + ["workload.consumer.fetch.wait.max.ms=50"])
    assert campaign.workload.producer == {"request.timeout.ms": 3000, "delivery.timeout.ms": 10000,
                                          "socket.connection.setup.timeout.ms": 1000}
    assert campaign.workload.consumer["fetch.wait.max.ms"] == 50


def test_campaign_properties_override_kchaos_defaults_but_not_the_cluster_connection():
    conf = confluent_producer_conf({"bootstrap.servers": "h:1"}, {"retry.backoff.ms": 250, "linger.ms": 0})
    assert conf["retry.backoff.ms"] == 250 and conf["linger.ms"] == 0 and conf["acks"] == CONFLUENT_PRODUCER["acks"]
    assert conf["bootstrap.servers"] == "h:1"


@pytest.mark.parametrize("table,name", [("producer", n) for n in sorted(OWNED_PRODUCER)]
                         + [("consumer", n) for n in sorted(OWNED_CONSUMER)])
def test_owned_properties_are_refused_with_the_reason(table, name):
    with pytest.raises(ConfigError) as err:
        load_campaign(None, [f"workload.{table}.{name}=x"])
    message = str(err.value)
    assert f"workload.{table}.{name} is set by kchaos" in message and "\n" not in message.strip()


@pytest.mark.parametrize("assignment,words", [
    ("workload.producer.no.such.property=1", "No such configuration property"),
    ("workload.consumer.fetch.wait.max.ms=soon", "fetch.wait.max.ms"),
    # a combination librdkafka refuses, checked with kchaos' own settings (the default's 30 s
    # session, on the classic protocol: under KIP-848 the broker keeps the session)
    ("workload.group_protocol=classic workload.consumer.max.poll.interval.ms=5000", "must be >= `session.timeout.ms`"),
    # Jepsen's Java value: librdkafka's floor for this property is 1000
    ("workload.producer.socket.connection.setup.timeout.ms=500", "outside allowed range 1000"),
    # only a transactional producer refuses this (the workers' is): the default's 20 s delivery
    # timeout (message.timeout.ms) under a shorter transaction timeout
    ("workload.transaction_timeout_ms=15000", "must be set <= `transaction.timeout.ms`"),
])
def test_librdkafka_refuses_unknown_names_and_bad_values_on_load(assignment, words):
    with pytest.raises(ConfigError) as err:
        load_campaign(None, assignment.split())
    assert words in str(err.value) and "librdkafka refuses it" in str(err.value)


def test_java_driver_gets_the_tables_as_prefixed_properties():
    spec = WorkloadSpec(client="java", producer={"request.timeout.ms": 3000, "enable.metrics.push": False},
                        consumer={"fetch.max.wait.ms": 50})
    text = worker_properties({"workload": spec.model_dump(mode="json"), "client": {"bootstrap.servers": "h:1"},
                              "worker": "w1", "incarnation": 1, "txid_prefix": "t", "seed": 1, "history_path": "/h"})
    lines = set(text.splitlines())
    assert {"kchaos.producer.request.timeout.ms=3000", "kchaos.producer.enable.metrics.push=false",
            "kchaos.consumer.fetch.max.wait.ms=50"} <= lines


def test_external_pipelines_set_their_own_client_properties():
    with pytest.raises(ValueError, match="external_command pipeline sets its own"):
        WorkloadSpec(external_command=("app",), producer={"linger.ms": 1})
