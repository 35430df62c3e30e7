"""kchaos: a chaos-testing harness for Apache Kafka's exactly-once guarantees.

The root package holds the foundation every layer may import (errors, paths, waiting, run
directories and atomic writes, signal handling); nothing in it imports a layer above. The layers
are subpackages mapped from the repository's top-level folders (see pyproject.toml):
``kchaos.clusters`` -> ``clusters/``, ``kchaos.workloads``, ``kchaos.faults``, ``kchaos.verifier``,
``kchaos.reports``, and on top ``kchaos.harness`` and ``kchaos.ci``, which may import everything
and which nothing imports.
"""
