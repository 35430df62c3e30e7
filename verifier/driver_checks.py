"""The checks both engines run on the driver, over what each has collected there: the
coordinator's transactions (segmented by the engine: coordinator_log), the group's offset
commits, the client history. One function each, imported by both engine modules (the registry,
verifier/checks.py, finds a check's function in the engine module by name)."""

from __future__ import annotations

from typing import Any

from kchaos.verifier import evidence
from kchaos.verifier.checks import offset_commit_result, result, split_result
from kchaos.verifier.coordinator_log import judge
from kchaos.verifier.offsets_log import lost_offset_commit_cases, offsets_backwards_cases
from kchaos.verifier.results import CheckResult


def check_split_transactions(data: Any) -> CheckResult:
    """``data.coordinator_transactions()`` (the engine's segmentation of the log) judged against
    the history; the coordinator's facts are kept on ``data`` for the results."""
    log_complete = evidence.compaction_note(data.compaction, "__transaction_state") is None
    cases, data.coordinator_facts = judge(data.coordinator_transactions(), data.history, data.late_requests(),
                                          log_complete)
    return split_result(cases, data.coordinator_facts)


def check_lost_offset_commits(data: Any) -> CheckResult:
    cases, checked = lost_offset_commit_cases(data.history, data.offset_log, data.workload.input_topic)
    return offset_commit_result(cases, checked, data.history.committed_transactions())


def check_offsets_backwards(data: Any) -> CheckResult:
    return result("offsets-backwards", offsets_backwards_cases(data.offset_log, data.workload.input_topic))
