"""The clock fault's proof of a step (faults/kinds/clock.py, ``_measure``) on a cluster with
dedicated controllers: a controller-only node leads no partition, so no record carries its clock.
It is said (``controller_only``) and not waited for; before issue 61 the probe waited its 8 s out
on such a node, which held the step that much longer than the campaign's hold."""

from __future__ import annotations

import time
from types import SimpleNamespace

from kchaos.faults.kinds import clock


def _fault(nodes, cluster):
    fault = clock.ClockFault.__new__(clock.ClockFault)
    fault.ctx = SimpleNamespace(cluster=cluster)
    fault.target = {"nodes": nodes}
    return fault


def _cluster(broker_ids):
    return SimpleNamespace(brokers=[SimpleNamespace(node_id=n) for n in broker_ids])


def test_a_controller_only_target_is_not_waited_for(monkeypatch):
    asked = []
    monkeypatch.setattr(clock, "measure_broker_clocks", lambda *a, **k: asked.append(k) or {"brokers": {}})
    started = time.monotonic()
    out = _fault([1], _cluster([4, 5, 6]))._measure(lambda offset_ms: True)
    assert time.monotonic() - started < 1
    assert out == {"controller_only": [1], "applied": None, "after_s": 0.0}
    assert not asked


def test_a_broker_beside_a_controller_is_measured_alone(monkeypatch):
    asked = []

    def probe(cluster, samples, nodes):
        asked.append(nodes)
        return {"brokers": {"4": {"offset_ms": 3600000.0, "bound_ms": 2.0}}}

    monkeypatch.setattr(clock, "measure_broker_clocks", probe)
    out = _fault([2, 4], _cluster([4, 5, 6]))._measure(lambda offset_ms: abs(offset_ms - 3600000) <= 1000)
    assert asked == [[4]]
    assert out["applied"] is True and out["controller_only"] == [2] and out["4"]["offset_ms"] == 3600000.0
