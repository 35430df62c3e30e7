"""The interface an engine implements: one query per registered check.

verifier/checks.py holds what every check means (its anomaly, requirements, explanations) and
names the query that finds its cases as a method of :class:`Engine`; an engine (the single-process
reference, verifier/pychecker.py; the Spark job, verifier/spark/checks.py) implements every one
over its own run object. An engine that misses one cannot be made (``abc``), so a check added to
the registry is a check both engines must answer, which the differential suite then compares.
"""

from __future__ import annotations

import abc
from typing import Any

from kchaos.verifier.results import CheckResult


class Engine(abc.ABC):
    """One query per check; ``data`` is the engine's own run object (run_data.RunData,
    spark.run.SparkRun), which exposes what verifier/evidence.py and the driver-side checks read."""

    name: str

    @abc.abstractmethod
    def duplicates(self, data: Any) -> CheckResult: ...

    @abc.abstractmethod
    def lost_input(self, data: Any) -> CheckResult: ...

    @abc.abstractmethod
    def offsets_ahead(self, data: Any) -> CheckResult: ...

    @abc.abstractmethod
    def torn_transactions(self, data: Any) -> CheckResult: ...

    @abc.abstractmethod
    def aborted_reads(self, data: Any) -> CheckResult: ...

    @abc.abstractmethod
    def lost_writes(self, data: Any) -> CheckResult: ...

    @abc.abstractmethod
    def offsets_behind(self, data: Any) -> CheckResult: ...

    @abc.abstractmethod
    def split_transactions(self, data: Any) -> CheckResult: ...

    @abc.abstractmethod
    def lost_offset_commits(self, data: Any) -> CheckResult: ...

    @abc.abstractmethod
    def offsets_backwards(self, data: Any) -> CheckResult: ...

    @abc.abstractmethod
    def acknowledged_inputs(self, data: Any) -> CheckResult: ...

    @abc.abstractmethod
    def input_mismatches(self, data: Any) -> CheckResult: ...

    @abc.abstractmethod
    def txn_transitions(self, data: Any) -> CheckResult: ...

    @abc.abstractmethod
    def hanging_transactions(self, data: Any) -> CheckResult: ...

    @abc.abstractmethod
    def zombie_writes(self, data: Any) -> CheckResult: ...

    @abc.abstractmethod
    def nonmonotonic(self, data: Any) -> CheckResult: ...

    @abc.abstractmethod
    def progress(self, data: Any) -> CheckResult: ...

    # read-side: the observers' reads (verifier/observations.py holds what both share)
    @abc.abstractmethod
    def inconsistent_offsets(self, data: Any) -> CheckResult: ...

    @abc.abstractmethod
    def observed_aborted_reads(self, data: Any) -> CheckResult: ...

    @abc.abstractmethod
    def poll_skips(self, data: Any) -> CheckResult: ...

    @abc.abstractmethod
    def nonmonotonic_polls(self, data: Any) -> CheckResult: ...

    @abc.abstractmethod
    def unseen(self, data: Any) -> CheckResult: ...

    # liveness: what the run did after the final heal (verifier/liveness.py, driver_checks.py)
    @abc.abstractmethod
    def stalled_pipeline(self, data: Any) -> CheckResult: ...

    @abc.abstractmethod
    def unprocessed_assignments(self, data: Any) -> CheckResult: ...

    @abc.abstractmethod
    def brokers_rejoined(self, data: Any) -> CheckResult: ...
