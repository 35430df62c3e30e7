"""A fault kind says what it needs where it is declared (faults/kinds: ``needs``, ``workload``,
``evidence``, ``aimed_at_work``), so no module elsewhere recognises a kind by its name: no
family prefix (``"clock-"``), no ``"fault:<kind>"``, no list of kind names to test a kind
against. Adding a kind is one module (or one declaration) plus its tests."""

from __future__ import annotations

import ast

import pytest

from kchaos.faults.kinds import FENCES_TRANSACTIONAL_ID, KINDS, MOVES_BROKER_CLOCK, ClusterNeeds, kinds_with
from tests.unit.test_layering import ROOT, code_files


def _spellings() -> set[str]:
    families = {name.split("-")[0] for name in KINDS}
    return ({f"{f}-" for f in families} | {f"fault:{f}-" for f in families} | {f"fault:{k}" for k in KINDS})


def name_matches(source: str, where: str = "<snippet>") -> list[str]:
    """Each place ``source`` recognises a fault kind by its name."""
    spellings = _spellings()
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and node.value in spellings:
            found.append(f"{where}:{node.lineno}: {node.value!r}")
        if isinstance(node, ast.Compare):
            for op, right in zip(node.ops, node.comparators):
                if isinstance(op, (ast.In, ast.NotIn)) and isinstance(right, (ast.Tuple, ast.Set, ast.List)) \
                        and right.elts and all(isinstance(e, ast.Constant) and e.value in KINDS for e in right.elts):
                    found.append(f"{where}:{node.lineno}: in {ast.unparse(right)}")
    return found


def test_no_module_outside_the_kinds_recognises_a_kind_by_its_name():
    kinds = ROOT / "faults" / "kinds"
    found = [hit for p in code_files() if not p.is_relative_to(kinds)
             for hit in name_matches(p.read_text(), str(p.relative_to(ROOT)))]
    assert found == []


def test_a_prefix_a_fault_operation_and_a_list_of_kinds_are_caught():
    assert name_matches('if not op["f"].startswith("fault:clock-"): pass')
    assert name_matches('if op["f"] == "fault:epoch-jump": pass')
    assert name_matches('if kind in ("zombie", "txid-takeover"): pass')
    assert name_matches('if sf.kind not in ("kill", "pause", "terminate", "kill-isolated"): pass')
    assert name_matches('if action in ("kill", "start"): pass') == []


@pytest.mark.parametrize("kind, table, expected", [
    ("clock-bump", "cluster", {"clock_control": True}),
    ("disk-full", "cluster", {"disk_limit_mb": 256}),
    ("message-hold", "cluster", {"proxy_messages": True}),
    ("message-hold", "external", {"front": True}),
    ("latency", "external", {"front": True}),
    ("kill", "cluster", {}),
])
def test_a_kind_declares_what_it_needs_of_the_cluster(kind, table, expected):
    assert dict(getattr(KINDS[kind].cluster_needs({}), table)) == expected


def test_parameters_add_what_they_need():
    assert KINDS["message-hold"].cluster_needs({"link": "inter-broker"}).cluster == {
        "proxy_messages": True, "proxy_messages_between_brokers": True}
    assert KINDS["marker-hold-failover"].cluster_needs({}).cluster["proxy_messages_between_brokers"] is True
    assert KINDS["message-hold"].cluster_needs({"link": "client"}) == KINDS["message-hold"].needs
    assert KINDS["kill"].needs == ClusterNeeds()


def test_the_evidence_rules_and_the_aimed_kinds_are_declared():
    assert kinds_with(MOVES_BROKER_CLOCK) == {"clock-bump", "clock-strobe", "clock-drift"}
    assert kinds_with(FENCES_TRANSACTIONAL_ID) == {"epoch-jump"}
    assert {k for k in KINDS if KINDS[k].aimed_at_work} == {"kill", "pause", "terminate", "kill-isolated"}
    assert {k for k in KINDS if KINDS[k].workload} == {"zombie", "txid-takeover"}
