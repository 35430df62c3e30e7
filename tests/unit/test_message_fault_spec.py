"""Message faults in a campaign: parameters checked on load, the proxy turned on by them, the
capability refused when the campaign turns it off, and the hunt campaign as shipped."""

from pathlib import Path

import pytest

from kchaos.errors import CapabilityError, ConfigError
from kchaos.faults.schedule import generate_schedule
from kchaos.harness.campaign import load_campaign

HOLD = ["faults.enabled=true", "faults.mix.0.kind=message-hold", "faults.mix.0.target=txn-coordinator"]


def test_a_message_fault_turns_the_message_proxy_on():
    assert load_campaign(None).cluster.proxy_messages is False
    campaign = load_campaign(None, HOLD)
    assert campaign.cluster.proxy_messages is True
    entry = campaign.faults.entries()[0]
    assert entry.kind == "message-hold" and entry.params == {}


def test_a_campaign_that_turns_the_proxy_off_gets_a_capability_error():
    with pytest.raises(CapabilityError, match="'messages' capability"):
        load_campaign(None, HOLD + ["cluster.proxy_messages=false"])


@pytest.mark.parametrize("params, message", [
    ('{ apis = ["EndTransaction"] }', "apis must be a list of API names"),
    ('{ apis = "EndTxn" }', "apis must be a list"),
    ('{ worker = "w1" }', "worker is a worker slot number"),
    ('{ count = -1 }', "count must be a number >= 0"),
    ('{ delay_ms = 5 }', "has no parameter delay_ms"),
])
def test_bad_message_fault_parameters_are_load_errors(tmp_path, params, message):
    path = tmp_path / "c.toml"
    path.write_text(f'[faults]\n[[faults.mix]]\nkind = "message-hold"\ntarget = "txn-coordinator"\nparams = {params}\n')
    with pytest.raises(ConfigError, match=message):
        load_campaign(path)


def test_an_error_response_is_offered_only_where_it_can_be_forged(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[faults]\n[[faults.mix]]\nkind = "message-error"\ntarget = "leader-output"\n'
                    'params = { apis = ["Produce", "Fetch"], error = "NOT_LEADER_OR_FOLLOWER" }\n')
    with pytest.raises(ConfigError, match="forge an error response for EndTxn, AddOffsetsToTxn, InitProducerId "
                                          "\\(one error code\\) and Produce v3-13, AddPartitionsToTxn v0-5, "
                                          "TxnOffsetCommit v0-6 \\(every partition of the request\\) only, not Fetch"):
        load_campaign(path)


@pytest.mark.parametrize("api, error", [("Produce", "NOT_LEADER_OR_FOLLOWER"),
                                        ("AddPartitionsToTxn", "CONCURRENT_TRANSACTIONS"),
                                        ("TxnOffsetCommit", "COORDINATOR_LOAD_IN_PROGRESS"),
                                        ("TxnOffsetCommit", "UNKNOWN_MEMBER_ID")])
def test_an_error_is_forged_on_the_per_partition_answers(tmp_path, api, error):
    path = tmp_path / "c.toml"
    path.write_text(f'[faults]\n[[faults.mix]]\nkind = "message-error"\ntarget = "leader-output"\n'
                    f'params = {{ apis = ["{api}"], error = "{error}", count = 2 }}\n')
    entry = load_campaign(path).faults.entries()[0]
    assert entry.params == {"apis": [api], "error": error, "count": 2}


def test_the_hunt_campaign_schedules_its_message_faults_with_their_parameters():
    campaign = load_campaign(Path("hunt-kip890"))
    schedule = generate_schedule(campaign.faults, campaign.run.duration_s, 11)
    kinds = {f.kind for f in schedule}
    assert {"message-hold", "message-duplicate", "pause"} <= kinds
    held = next(f for f in schedule if f.kind == "message-hold" and f.target == "all")
    assert held.params == {"apis": ["EndTxn"], "count": 1.0, "release_after_ms": 6000.0}
    assert campaign.workload.producer["request.timeout.ms"] == 3000


@pytest.mark.parametrize("client", ["franz-go", "sarama", "aiokafka", "kafka-python", "kafkajs"])
def test_the_kip890_hunt_loads_on_every_client_with_its_short_request_timeout(client):
    """librdkafka's own names (socket.timeout.ms, its delivery timeout) are the confluent worker's;
    another client's worker runs without them and says so."""
    from kchaos.workloads.native_clients import not_honoured

    campaign = load_campaign(Path("hunt-kip890"), [f"workload.client={client}"])
    assert campaign.workload.producer == {"request.timeout.ms": 3000}
    assert campaign.workload.producer_for("confluent")["socket.timeout.ms"] == 3000
    assert "workload.client_properties" in not_honoured(campaign.workload.model_dump())


@pytest.mark.parametrize("client", ["confluent", "franz-go", "sarama", "aiokafka", "kafka-python", "kafkajs", "java"])
def test_the_client_errors_campaign_loads_on_every_client_with_its_forged_errors(client):
    campaign = load_campaign(Path("hunt-client-errors"), [f"workload.client={client}"])
    assert (campaign.cluster.kafka_version, campaign.cluster.transaction_version) == ("4.4.0", 2)
    assert campaign.cluster.proxy_messages
    forged = {(e.params["apis"][0], e.params.get("error")) for e in campaign.faults.entries()}
    assert forged == {("AddPartitionsToTxn", "CONCURRENT_TRANSACTIONS"), ("Produce", "NOT_LEADER_OR_FOLLOWER"),
                      ("TxnOffsetCommit", "COORDINATOR_LOAD_IN_PROGRESS"), ("EndTxn", "NOT_COORDINATOR"),
                      ("EndTxn", "CONCURRENT_TRANSACTIONS"), ("EndTxn", None), ("TxnOffsetCommit", None)}
    schedule = generate_schedule(campaign.faults, campaign.run.duration_s, 1)
    assert {f.kind for f in schedule} == {"message-error", "message-drop-response"}
