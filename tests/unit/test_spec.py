from pathlib import Path

import pytest

from kchaos.clusters.spec import ClusterSpec, apply_overrides, parse_value
from kchaos.harness.campaign import load_campaign
from kchaos.errors import ConfigError


def test_defaults_are_a_three_node_local_cluster():
    spec = ClusterSpec.load({})
    assert (spec.backend, spec.nodes, spec.kafka_version, spec.replication_factor, spec.min_insync_replicas) == \
        ("local", 3, "4.2.1", 3, 2)


def test_single_node_lowers_replication():
    spec = ClusterSpec.load({"nodes": 1})
    assert (spec.replication_factor, spec.min_insync_replicas) == (1, 1)


@pytest.mark.parametrize("data, needle", [
    ({"nodes": 0}, "cluster.nodes"),
    ({"nodes": 12}, "cluster.nodes"),
    ({"kafka_version": "latest"}, "cluster.kafka_version: not a release number"),
    ({"kafka_version": "2.8.0"}, "KRaft"),
    ({"transaction_version": 3}, "cluster.transaction_version"),
    ({"backend": "k8s"}, "cluster.backend"),
    ({"nodez": 3}, "cluster.nodez: unknown key"),
    ({"broker": {"listeners": "PLAINTEXT://:9092"}}, "managed by kchaos"),
    ({"broker": {"bad key": "1"}}, "not a broker property name"),
    ({"backend": "external"}, "bootstrap_servers"),
    ({"kafka_version": "3.9.1", "transaction_version": 2}, "Kafka 4.0"),
])
def test_invalid_specs_name_the_key(data, needle):
    with pytest.raises(ConfigError) as err:
        ClusterSpec.load(data)
    assert needle in str(err.value)


def test_inline_secrets_are_refused_and_env_references_resolve(monkeypatch):
    with pytest.raises(ConfigError, match="looks like a secret"):
        ClusterSpec.load({"backend": "external", "external": {
            "bootstrap_servers": "h:9092", "client_config": {"sasl.password": "hunter2"}}})
    spec = ClusterSpec.load({"backend": "external", "external": {
        "bootstrap_servers": "h:9092", "client_config": {"sasl.password": "${ENV:KC_PW}", "security.protocol": "SASL_SSL"}}})
    assert "hunter2" not in spec.model_dump_json()
    with pytest.raises(ConfigError, match="KC_PW is not set"):
        spec.external.resolved_client_config()
    monkeypatch.setenv("KC_PW", "hunter2")
    assert spec.external.resolved_client_config()["sasl.password"] == "hunter2"


def test_broker_overrides_are_strings():
    spec = ClusterSpec.load({"broker": {"replica.lag.time.max.ms": 10000, "auto.create.topics.enable": True}})
    assert spec.broker == {"replica.lag.time.max.ms": "10000", "auto.create.topics.enable": "true"}


def test_set_overrides_nest_and_keep_map_keys_whole():
    data = apply_overrides({"cluster": {"nodes": 3}}, [
        "cluster.nodes=1", "cluster.broker.replica.lag.time.max.ms=10000", "run.seed=7", "cluster.proxy_clients=false"])
    assert data == {"cluster": {"nodes": 1, "broker": {"replica.lag.time.max.ms": 10000}, "proxy_clients": False},
                    "run": {"seed": 7}}
    assert parse_value("1.5") == 1.5 and parse_value("abc") == "abc"
    with pytest.raises(ConfigError, match="not key=value"):
        apply_overrides({}, ["cluster.nodes"])


def test_set_with_no_value_unsets_the_key_and_its_default_applies():
    data = apply_overrides({"workload": {"epochs_before_rollover": 1, "workers": 3}}, ["workload.epochs_before_rollover="])
    assert data == {"workload": {"workers": 3}}
    assert load_campaign(Path("hunt-hanging"), ["workload.epochs_before_rollover="]).workload.epochs_before_rollover is None
    assert load_campaign(Path("hunt-hanging")).workload.epochs_before_rollover == 1


def test_set_takes_toml_arrays():
    assert parse_value("[]") == [] and parse_value('["kip890", "leaders"]') == ["kip890", "leaders"]
    assert load_campaign(None, ['faults.packages=["coordinators"]']).faults.packages == ("coordinators",)
    with pytest.raises(ConfigError, match="not a TOML array"):
        parse_value("[kip890]")


def test_set_reaches_into_arrays_of_tables_by_index():
    data = {"steps": [{"at_s": 30, "level": 2}, {"at_s": 60, "level": 1}], "faults": {"mix": [{"kind": "kill"}]}}
    out = apply_overrides(data, ["steps.1.at_s=300", "faults.mix.0.target=controller"])
    assert out["steps"] == [{"at_s": 30, "level": 2}, {"at_s": 300, "level": 1}]
    assert out["faults"]["mix"] == [{"kind": "kill", "target": "controller"}]
    assert data["steps"][1]["at_s"] == 60  # the loaded campaign is not changed in place
    with pytest.raises(ConfigError, match="steps.2: no such entry; the array has 2"):
        apply_overrides(data, ["steps.2.at_s=5"])
    with pytest.raises(ConfigError, match="steps.x: no such entry"):
        apply_overrides(data, ["steps.x.at_s=5"])
    with pytest.raises(ConfigError, match="steps is an array of tables"):
        apply_overrides(data, ["steps.at_s=5"])


def test_set_step_keys_are_validated_like_the_file(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[run]\nduration_s = 100\n[cluster]\ntransaction_version = 1\n[workload]\nclient = "java"\n'
                    '[faults]\nenabled = false\n'
                    '[[steps]]\nat_s = 20\naction = "feature"\nfeature = "transaction.version"\nlevel = 2\n')
    assert load_campaign(path, ["steps.0.at_s=50"]).steps[0].at_s == 50
    with pytest.raises(ConfigError, match="duration"):
        load_campaign(path, ["steps.0.at_s=500"])


def test_campaign_errors_name_file_and_key(tmp_path):
    bad = tmp_path / "c.toml"
    bad.write_text('[cluster]\nnodes = "three"\n[workloadz]\n')
    with pytest.raises(ConfigError) as err:
        load_campaign(bad)
    assert "cluster.nodes" in str(err.value) and "workloadz: unknown key" in str(err.value)
    with pytest.raises(ConfigError, match="does not exist"):
        load_campaign(tmp_path / "missing.toml")
    (tmp_path / "broken.toml").write_text("[cluster\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_campaign(tmp_path / "broken.toml")


def test_default_campaign_loads_and_overrides_apply():
    campaign = load_campaign(None, ["cluster.nodes=1", "run.seed=42"])
    assert campaign.cluster.nodes == 1 and campaign.run.seed == 42


def test_kip848_groups_on_a_release_before_4_0_are_refused_before_anything_starts():
    """On 3.9.1 the default campaign's consumer-protocol workers joined no group and processed
    nothing (an INVALID run that says nothing about the release)."""
    with pytest.raises(ConfigError) as err:
        load_campaign(None, ["cluster.kafka_version=3.9.1"])
    assert "needs Kafka 4.0" in err.value.one_line() and "group_protocol=classic" in err.value.one_line()
    assert load_campaign(None, ["cluster.kafka_version=3.9.1", "workload.group_protocol=classic"]).workload.group_protocol == "classic"
