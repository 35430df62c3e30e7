"""A secured cluster's client settings: librdkafka's dialect -> Java's, secrets as references that
each client resolves itself (clusters/client_security.py). Hand-made settings only."""

from __future__ import annotations

import json

import pytest

from kchaos.clusters import client_security as cs
from kchaos.clusters.spec import ClusterSpec
from kchaos.errors import ConfigError
from kchaos.workloads.java_client import worker_properties


def test_references_are_resolved_from_the_environment_and_a_missing_one_is_named(monkeypatch):
    monkeypatch.setenv("KCHAOS_TEST_PW", "s3cret")
    config = {"sasl.password": "${ENV:KCHAOS_TEST_PW}", "sasl.username": "alice"}
    assert cs.resolve_env_refs(config) == {"sasl.password": "s3cret", "sasl.username": "alice"}
    monkeypatch.delenv("KCHAOS_TEST_PW")
    with pytest.raises(ConfigError) as err:
        cs.resolve_env_refs(config)
    assert "KCHAOS_TEST_PW is not set" in err.value.cause and err.value.exit_code == 3


def test_plaintext_needs_nothing_in_java():
    assert cs.java_client_properties({}) == {}
    assert cs.java_client_properties({"security.protocol": "plaintext", "socket.timeout.ms": "5000"}) == {}


def test_tls_trust_and_host_name_checking_translate():
    props = cs.java_client_properties({"security.protocol": "SSL", "ssl.ca.location": "/etc/ca.pem",
                                       "ssl.endpoint.identification.algorithm": "none"})
    assert props == {"security.protocol": "SSL", "ssl.truststore.type": "PEM", "ssl.truststore.location": "/etc/ca.pem",
                     "ssl.endpoint.identification.algorithm": ""}


def test_a_client_certificate_is_read_by_the_jvm_from_the_users_files_never_copied(tmp_path):
    key, cert = tmp_path / "client.key", tmp_path / "client.pem"
    props = cs.java_client_properties({"security.protocol": "SSL", "ssl.certificate.location": str(cert),
                                       "ssl.key.location": str(key), "ssl.key.password": "${ENV:KEY_PW}"})
    assert props["ssl.keystore.type"] == "PEM"
    assert props["ssl.keystore.key"] == f"${{kchaosdir:{tmp_path}:client.key}}"
    assert props["ssl.keystore.certificate.chain"] == f"${{kchaosdir:{tmp_path}:client.pem}}"
    assert props["ssl.key.password"] == "${kchaosenv:KEY_PW}"
    assert props["config.providers"] == "kchaosenv,kchaosdir"
    assert props["config.providers.kchaosdir.class"].endswith("DirectoryConfigProvider")
    assert props["config.providers.kchaosenv.class"].endswith("EnvVarConfigProvider")
    assert list(tmp_path.iterdir()) == []  # nothing written
    with pytest.raises(ConfigError, match="go together"):
        cs.java_client_properties({"security.protocol": "SSL", "ssl.certificate.location": str(cert)})


@pytest.mark.parametrize("mechanism, module", [("PLAIN", "plain.PlainLoginModule"),
                                               ("SCRAM-SHA-512", "scram.ScramLoginModule")])
def test_sasl_becomes_a_jaas_line_whose_password_is_a_reference(mechanism, module):
    props = cs.java_client_properties({"security.protocol": "SASL_SSL", "sasl.mechanisms": mechanism,
                                       "sasl.username": "alice", "sasl.password": "${ENV:KAFKA_PW}"})
    assert props["sasl.mechanism"] == mechanism
    assert props["sasl.jaas.config"] == (f'org.apache.kafka.common.security.{module} required username="alice" '
                                         'password="${kchaosenv:KAFKA_PW}";')
    assert props["config.providers"] == "kchaosenv"


def test_what_cannot_be_translated_is_refused_by_name():
    with pytest.raises(ConfigError, match="OAUTHBEARER"):
        cs.java_client_properties({"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER"})
    with pytest.raises(ConfigError, match="ssl.crl.location"):
        cs.java_client_properties({"security.protocol": "SSL", "ssl.crl.location": "/etc/crl.pem"})
    with pytest.raises(ConfigError, match="security.protocol"):
        cs.security_protocol({"security.protocol": "TLS"})


def test_properties_text_escapes_what_java_properties_would_read_otherwise():
    text = cs.properties_text({"sasl.jaas.config": 'M required password="${kchaosenv:PW}";', "a": " lead"})
    assert text == 'a=\\ lead\nsasl.jaas.config=M required password\\="${kchaosenv\\:PW}";\n'


def test_only_a_secured_clusters_settings_are_recorded_and_only_as_references(tmp_path):
    cs.record(tmp_path / "plain", {"bootstrap.servers": "x:1"})
    assert not (tmp_path / "plain").exists()
    run = tmp_path / "run"
    cs.record(run / "cluster", {"security.protocol": "SASL_SSL", "sasl.password": "${ENV:PW}"})
    assert cs.recorded(run) == {"security.protocol": "SASL_SSL", "sasl.password": "${ENV:PW}"}
    assert cs.recorded(tmp_path / "other") == {}


def _external(client_config: dict, **extra) -> ClusterSpec:
    return ClusterSpec.load({"backend": "external", "external": {"bootstrap_servers": "10.0.0.1:9093",
                                                                 "client_config": client_config, **extra}})


def test_a_java_worker_gets_javas_dialect_with_its_secret_as_a_reference(monkeypatch):
    monkeypatch.setenv("KAFKA_PW", "s3cret")
    from kchaos.clusters.external import ExternalCluster

    cluster = ExternalCluster(_external({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
                                         "sasl.username": "alice", "sasl.password": "${ENV:KAFKA_PW}",
                                         "ssl.ca.location": "/etc/ca.pem"}))
    assert cluster.client_config()["sasl.password"] == "s3cret"  # for clients made in this process
    refs = cluster.client_config_refs()
    assert refs["sasl.password"] == "${ENV:KAFKA_PW}" and refs["bootstrap.servers"] == "10.0.0.1:9093"
    from kchaos.workloads.spec import WorkloadSpec

    config = {"workload": WorkloadSpec().model_dump(mode="json"), "worker": "w0", "incarnation": 1, "client": refs,
              "seed": 1, "txid_prefix": "t", "history_path": "/tmp/h/w0.1.jsonl"}
    text = worker_properties(config)
    assert "s3cret" not in text and "ssl.ca.location" not in text
    assert 'password\\="${kchaosenv\\:KAFKA_PW}"' in text and "ssl.truststore.location=/etc/ca.pem" in text
    assert "bootstrap.servers=10.0.0.1\\:9093" in text
    assert "s3cret" not in json.dumps(config)


def test_through_a_tls_front_the_clients_trust_the_fronts_ca_and_show_no_certificate():
    from kchaos.clusters.external import ExternalCluster

    cluster = ExternalCluster(_external({"security.protocol": "SSL", "ssl.ca.location": "/etc/brokers-ca.pem",
                                         "ssl.certificate.location": "/etc/me.pem", "ssl.key.location": "/etc/me.key"}))
    assert cluster.client_security()["ssl.ca.location"] == "/etc/brokers-ca.pem"
    cluster._front_tls = {"cert": "/x/front.pem", "key": "/x/front.key", "ca": "/x/ca.pem"}
    assert cluster.client_security() == {"security.protocol": "SSL", "ssl.ca.location": "/x/ca.pem"}


def test_the_fronts_own_certificate_comes_with_its_key():
    with pytest.raises(ConfigError, match="front_certificate and front_key go together"):
        _external({"security.protocol": "SSL"}, front_certificate="/etc/front.pem")
    with pytest.raises(ConfigError, match="not one of"):
        _external({"security.protocol": "SSH"})
