"""kchaos: a chaos-testing harness for Apache Kafka's exactly-once guarantees.

The root package's own modules are the foundation every layer may import: errors and exit codes,
paths, waiting, atomic writes and the one JSON reader, the run directory's record, signals, the
log, text, and :func:`kchaos_version`; nothing in them imports a layer above. Its sub-packages
``kchaos.protocol`` (Kafka's wire format) and ``kchaos.runtime`` (what kchaos runs and fetches on
this machine) are the two floors just above it. The other layers are sub-packages mapped from the
repository's top-level folders (see pyproject.toml), in the order tests/unit/test_layering.py
holds them to: ``kchaos.clusters`` -> ``clusters/``, ``kchaos.workloads``, ``kchaos.faults``,
``kchaos.verifier``, ``kchaos.reports``, ``kchaos.harness``, ``kchaos.ci``, and on top
``kchaos.cli``, the one that sees both the harness and CI.
"""

import importlib.metadata


def kchaos_version() -> str:
    """The installed kchaos' version ("unknown" when it is not installed)."""
    try:
        return importlib.metadata.version("kchaos")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"
