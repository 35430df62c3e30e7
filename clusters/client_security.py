"""A cluster's client security settings, in the two dialects kchaos' clients speak.

``[cluster.external] client_config`` is written in librdkafka's dialect (the harness's admin, the
seeder, the observers and the Python workers are librdkafka clients), with secrets as
``${ENV:NAME}``. Kafka's Java clients (Kafka's own tools, the Java and Streams workers, Spark's
Kafka source) need the same settings in their dialect: :func:`java_client_properties` translates
them, and turns each ``${ENV:NAME}`` into a reference for Kafka's ``EnvVarConfigProvider``
(KIP-887), which the JVM resolves from its own environment. So no secret is ever written to a
file: the run directory holds references only, and every client resolves them as it starts
(:func:`resolve_env_refs`).

What is translated (docs/clusters.md, "Secured clusters"): ``security.protocol``; TLS trust
(``ssl.ca.location`` -> a PEM trust store), a client certificate (``ssl.certificate.location`` and
``ssl.key.location`` -> a PEM key store whose contents the JVM reads from those files through
Kafka's ``DirectoryConfigProvider``, with ``ssl.key.password``), host-name checking
(``ssl.endpoint.identification.algorithm``); SASL PLAIN and SCRAM (``sasl.mechanism(s)``,
``sasl.username``, ``sasl.password`` -> ``sasl.jaas.config``). Anything else is refused by name:
a Java client would otherwise ignore it and connect without it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Mapping

from kchaos.errors import ConfigError

ENV_REF = re.compile(r"^\$\{ENV:([A-Za-z_][A-Za-z0-9_]*)\}$")
#: the alias of Kafka's environment-variable config provider in the Java properties kchaos writes
JAVA_ENV_PROVIDER = "kchaosenv"
_JAVA_ENV_PROVIDER_CLASS = "org.apache.kafka.common.config.provider.EnvVarConfigProvider"
_TLS = {"SSL", "SASL_SSL"}
_PROTOCOLS = {"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}
_JAAS_MODULES = {"PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
                 "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
                 "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule"}
#: the alias of Kafka's directory config provider: a client certificate's files are read by the JVM
#: from where the user keeps them (no copy of a key anywhere)
JAVA_DIR_PROVIDER = "kchaosdir"
_JAVA_DIR_PROVIDER_CLASS = "org.apache.kafka.common.config.provider.DirectoryConfigProvider"


def resolve_env_refs(config: Mapping[str, str], where: str = "cluster.external.client_config") -> dict[str, str]:
    """``config`` with every ``${ENV:NAME}`` value read from the environment (now, by the process
    that makes the client)."""
    out = {}
    for key, value in config.items():
        match = ENV_REF.match(str(value))
        if match:
            name = match.group(1)
            if name not in os.environ:
                raise ConfigError(f"{where}.{key} refers to ${{ENV:{name}}} but {name} is not set",
                                  f"export {name}=... before running kchaos")
            value = os.environ[name]
        out[key] = value
    return out


#: in a cluster's work directory (RUN/cluster/): the clients' security settings as references, for
#: the processes that read the cluster after the run's clients (the Spark job)
RECORD_NAME = "client-security.json"


def record(work_dir: Path, config: Mapping[str, str]) -> None:
    """Keep the clients' settings (references only: never resolved values) in the run directory."""
    import json

    if is_secured(config):
        work_dir.mkdir(parents=True, exist_ok=True)
        (work_dir / RECORD_NAME).write_text(json.dumps(dict(config), indent=2, sort_keys=True))


def recorded(run: Path) -> dict[str, str]:
    """What :func:`record` kept for a run (RUN/cluster/), or nothing: a cluster needing no settings."""
    import json

    path = run / "cluster" / RECORD_NAME
    return json.loads(path.read_text()) if path.exists() else {}


def security_protocol(config: Mapping[str, str]) -> str:
    protocol = str(config.get("security.protocol", "PLAINTEXT")).upper()
    if protocol not in _PROTOCOLS:
        raise ConfigError(f"security.protocol {protocol!r} is not one of {', '.join(sorted(_PROTOCOLS))}")
    return protocol


def uses_tls(config: Mapping[str, str]) -> bool:
    return security_protocol(config) in _TLS


def is_secured(config: Mapping[str, str]) -> bool:
    return security_protocol(config) != "PLAINTEXT"


def _java_value(value: str) -> str:
    """A librdkafka value as a Java property value: an ``${ENV:NAME}`` becomes a provider reference."""
    match = ENV_REF.match(value)
    return f"${{{JAVA_ENV_PROVIDER}:{match.group(1)}}}" if match else value


def _file_content_ref(path: str) -> str:
    """A reference Kafka's DirectoryConfigProvider resolves to the file's content."""
    file = Path(path).resolve()
    return f"${{{JAVA_DIR_PROVIDER}:{file.parent}:{file.name}}}"


def java_client_properties(config: Mapping[str, str]) -> dict[str, str]:
    """The Java properties for a client with librdkafka's ``config`` (bootstrap servers excluded)."""
    cfg = {k: str(v) for k, v in config.items()}
    protocol = security_protocol(cfg)
    out: dict[str, str] = {}
    if protocol == "PLAINTEXT":
        return out
    out["security.protocol"] = protocol
    used = {"security.protocol"}
    if protocol in _TLS:
        if "ssl.ca.location" in cfg:
            out.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": cfg["ssl.ca.location"]})
            used.add("ssl.ca.location")
        algorithm = cfg.get("ssl.endpoint.identification.algorithm")
        if algorithm is not None:
            out["ssl.endpoint.identification.algorithm"] = "" if algorithm.lower() == "none" else algorithm
            used.add("ssl.endpoint.identification.algorithm")
        cert, key = cfg.get("ssl.certificate.location"), cfg.get("ssl.key.location")
        if (cert is None) != (key is None):
            raise ConfigError("ssl.certificate.location and ssl.key.location go together")
        if cert is not None and key is not None:  # Java's PEM key store, as contents read by the JVM
            out.update({"ssl.keystore.type": "PEM", "ssl.keystore.key": _file_content_ref(key),
                        "ssl.keystore.certificate.chain": _file_content_ref(cert)})
            used |= {"ssl.certificate.location", "ssl.key.location"}
        if "ssl.key.password" in cfg:
            out["ssl.key.password"] = _java_value(cfg["ssl.key.password"])
            used.add("ssl.key.password")
    if protocol.startswith("SASL"):
        mechanism = (cfg.get("sasl.mechanism") or cfg.get("sasl.mechanisms") or "GSSAPI").upper()
        used |= {"sasl.mechanism", "sasl.mechanisms"}
        if mechanism not in _JAAS_MODULES:
            raise ConfigError(f"SASL mechanism {mechanism} cannot be translated for Kafka's Java clients (tools, Java "
                              "workers, Spark's Kafka source)", f"kchaos translates {', '.join(sorted(_JAAS_MODULES))}")
        if "sasl.username" not in cfg or "sasl.password" not in cfg:
            raise ConfigError(f"SASL {mechanism} needs sasl.username and sasl.password (the password as ${{ENV:NAME}})")
        user, password = _java_value(cfg["sasl.username"]), _java_value(cfg["sasl.password"])
        out["sasl.mechanism"] = mechanism
        out["sasl.jaas.config"] = (f'{_JAAS_MODULES[mechanism]} required username="{user}" '
                                   f'password="{password}";')
        used |= {"sasl.username", "sasl.password"}
    unknown = sorted(k for k in cfg if k not in used and k.startswith(("ssl.", "sasl.", "security.")))
    if unknown:
        raise ConfigError(f"client_config {', '.join(unknown)} cannot be translated for Kafka's Java clients, which "
                          "would connect without them", "docs/clusters.md, 'Secured clusters', lists what is")
    text = "".join(out.values())
    providers = [(alias, cls) for alias, cls in ((JAVA_ENV_PROVIDER, _JAVA_ENV_PROVIDER_CLASS),
                                                 (JAVA_DIR_PROVIDER, _JAVA_DIR_PROVIDER_CLASS))
                 if "${" + alias + ":" in text]
    if providers:
        out["config.providers"] = ",".join(alias for alias, _ in providers)
        out.update({f"config.providers.{alias}.class": cls for alias, cls in providers})
    return out


def properties_escape(text: str) -> str:
    """java.util.Properties escaping for keys and values (backslash, separators, leading space)."""
    out = text.replace("\\", "\\\\").replace("\n", "\\n").replace("=", "\\=").replace(":", "\\:")
    return ("\\" + out) if out.startswith(" ") else out


def properties_text(props: Mapping[str, str]) -> str:
    """``props`` as a Java .properties file."""
    return "".join(f"{properties_escape(k)}={properties_escape(v)}\n" for k, v in sorted(props.items()))
