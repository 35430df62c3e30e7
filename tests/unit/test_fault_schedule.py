import pytest

from kchaos.faults.schedule import generate_schedule, read_schedule, write_schedule
from kchaos.faults.scheduled import ScheduledFault
from kchaos.clusters.spec import ClusterSpec
from kchaos.faults.kinds import KINDS
from kchaos.faults.spec import PACKAGES, FaultsSpec, check_capabilities
from kchaos.harness.campaign import load_campaign
from kchaos.errors import CapabilityError, ConfigError


def _spec(**kw):
    base = {"mix": [{"kind": "kill", "target": "txn-coordinator"}, {"kind": "latency", "target": "all-clients"},
                    {"kind": "partition", "target": "ring", "weight": 3}], "interval_s": 5, "duration_s": 2}
    base.update(kw)
    return FaultsSpec.model_validate(base)


def test_same_seed_same_schedule_other_seed_other_schedule():
    a = generate_schedule(_spec(), 120, seed=42)
    b = generate_schedule(_spec(), 120, seed=42)
    c = generate_schedule(_spec(), 120, seed=43)
    assert a == b
    assert [(f.kind, f.target, f.seed) for f in a] != [(f.kind, f.target, f.seed) for f in c]


def test_schedule_fits_the_run_and_spaces_faults():
    schedule = generate_schedule(_spec(start_after_s=3), 30, seed=1)
    assert [f.at_s for f in schedule] == [3, 8, 13, 18, 23, 28]  # 33 + 2 s hold would pass 30 s
    assert all(f.at_s + f.hold_s <= 30 for f in schedule)


def test_round_robin_uses_every_entry():
    schedule = generate_schedule(_spec(order="round-robin"), 60, seed=9)
    assert {(f.kind, f.target) for f in schedule[:3]} == {("kill", "txn-coordinator"), ("latency", "all-clients"),
                                                          ("partition", "ring")}


def test_packages_compose_with_the_mix():
    spec = FaultsSpec.model_validate({"packages": ["coordinators", "clients"], "mix": [{"kind": "latency"}]})
    kinds = [(e.kind, e.resolved_target) for e in spec.entries()]
    assert len(kinds) == len(PACKAGES["coordinators"]) + len(PACKAGES["clients"]) + 1
    assert ("latency", "all-clients") in kinds  # a missing target is the kind's first accepted one


def test_schedule_round_trips_through_the_run_directory(tmp_path):
    schedule = generate_schedule(_spec(), 60, seed=5)
    write_schedule(tmp_path / "schedule.json", schedule, 5)
    assert read_schedule(tmp_path / "schedule.json") == schedule


@pytest.mark.parametrize("data, needle", [
    ({"mix": [{"kind": "nuke"}]}, "unknown fault kind 'nuke'; accepted: bandwidth, client-link-down, clock-bump, clock-drift, clock-strobe, disk-full, epoch-jump, kill"),
    ({"mix": [{"kind": "kill", "target": "the-moon"}]}, "cannot target 'the-moon'; accepted targets: random"),
    ({"mix": [{"kind": "latency", "params": {"speed": 1}}]}, "no parameter speed; accepted: jitter_ms, latency_ms"),
    ({"mix": [{"kind": "partition", "target": "isolate-controller", "params": {"spare_controller": "true"}}]},
     "spare_controller needs a role several nodes hold: isolate-random, isolate-leader-input, isolate-leader-output"),
    ({"packages": ["everything"]}, "unknown fault package 'everything'"),
    ({"mix": [{"kind": "kill"}], "interval_s": 5, "duration_s": 6}, "must heal before the next starts"),
    ({"mix": [{"kind": "kill", "duration_s": -1}]}, "duration_s"),
])
def test_bad_fault_definitions_are_rejected_with_the_accepted_values(tmp_path, data, needle):
    import json

    path = tmp_path / "c.toml"
    lines = ["[faults]"]
    for key in ("interval_s", "duration_s"):
        if key in data:
            lines.append(f"{key} = {data[key]}")
    if "packages" in data:
        lines.append(f"packages = {json.dumps(data['packages'])}")
    for entry in data.get("mix", []):
        lines.append("[[faults.mix]]")
        for k, v in entry.items():
            lines.append(f"{k} = {json.dumps(v) if not isinstance(v, dict) else '{ ' + ', '.join(f'{a} = {b}' for a, b in v.items()) + ' }'}")
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ConfigError) as err:
        load_campaign(path)
    assert needle in str(err.value)


def test_faults_the_backend_cannot_do_are_rejected_when_the_campaign_loads(tmp_path):
    path = tmp_path / "ext.toml"
    path.write_text('[cluster]\nbackend = "external"\n[cluster.external]\nbootstrap_servers = "h:9092"\n'
                    '[[faults.mix]]\nkind = "kill"\ntarget = "txn-coordinator"\n')
    with pytest.raises(CapabilityError) as err:
        load_campaign(path)
    assert "fault 'kill' needs the 'kill' capability, which the external backend lacks" in str(err.value)
    with pytest.raises(CapabilityError, match="network"):
        check_capabilities(_spec(), ClusterSpec(backend="docker", proxy_clients=False))
    check_capabilities(_spec(), ClusterSpec(backend="docker"))  # partitions and client toxics on containers
    held = FaultsSpec.model_validate({"mix": [{"kind": "message-hold", "target": "txn-coordinator"}]})
    with pytest.raises(CapabilityError, match="'messages' capability, which the docker backend lacks"):
        check_capabilities(held, ClusterSpec(backend="docker"))
    # a message fault between brokers needs the message proxy on those links too
    between = FaultsSpec.model_validate({"mix": [{"kind": "message-hold", "target": "leader-output",
                                                  "params": {"apis": ["WriteTxnMarkers"], "link": "inter-broker"}}]})
    with pytest.raises(CapabilityError, match="'messages-between-brokers' capability"):
        check_capabilities(between, ClusterSpec(proxy_messages=True))
    check_capabilities(between, ClusterSpec(proxy_messages=True, proxy_messages_between_brokers=True))
    check_capabilities(FaultsSpec.model_validate({"mix": [{"kind": "worker-crash"}]}),
                       ClusterSpec(backend="external", external={"bootstrap_servers": "127.0.0.1:9092"}))  # client faults


def test_client_and_coordinator_faults_need_a_transactional_workload(tmp_path):
    path = tmp_path / "alo.toml"
    path.write_text('[workload]\ndelivery = "at-least-once"\n[[faults.mix]]\nkind = "zombie"\n')
    with pytest.raises(ConfigError, match="zombie needs a transactional workload"):
        load_campaign(path)


def test_default_campaign_has_the_required_fault_mix():
    campaign = load_campaign(None)
    schedule = generate_schedule(campaign.faults, campaign.run.duration_s, seed=123)
    kinds = {(f.kind, f.target, f.params.get("clients")) for f in schedule}
    assert len(schedule) >= 6
    assert {("kill", "txn-coordinator", None), ("kill", "leader-output", None), ("zombie", "random-worker", None),
            ("latency", "all-clients", None), ("partition", "isolate-leader-output", None),
            ("partition", "isolate-leader-output", "cut")} <= kinds
    assert set(KINDS) >= {f.kind for f in schedule}
    # paced by the work, and required to hit it (issue 59)
    assert campaign.faults.pacing.mode == "recovery" and campaign.faults.pacing.aim
    assert set(campaign.faults.exposure.committed) == {"kill", "partition", "latency"}


def test_marker_hold_failover_turns_the_proxy_on_between_brokers_and_needs_a_kill(tmp_path):
    """Its link is fixed to 'inter-broker' by the kind, not written in the campaign: loading still
    puts the message proxy on the links between brokers; the backend must also be able to kill."""
    path = tmp_path / "mhf.toml"
    path.write_text('[workload]\nclient = "java"\n[[faults.mix]]\nkind = "marker-hold-failover"\ntarget = "leader-output"\n')
    campaign = load_campaign(path)
    assert campaign.cluster.proxy_messages and campaign.cluster.proxy_messages_between_brokers
    spec = FaultsSpec.model_validate({"mix": [{"kind": "marker-hold-failover", "target": "leader-output"}]})
    with pytest.raises(CapabilityError, match="'messages-between-brokers' capability"):
        check_capabilities(spec, ClusterSpec(proxy_messages=True))
    with pytest.raises(ValueError, match="apis and link are fixed"):
        FaultsSpec.model_validate({"mix": [{"kind": "marker-hold-failover", "params": {"apis": ["EndTxn"]}}]})


def test_share_write_hold_failover_holds_state_writes_between_brokers_only():
    """Its API is its own (WriteShareGroupState), not the marker kind's, and it cannot be moved."""
    from kchaos.faults.kinds import KINDS

    FaultsSpec.model_validate({"mix": [{"kind": "share-write-hold-failover", "target": "share-coordinator"}]})
    assert KINDS["share-write-hold-failover"].check_params({}).apis == ["WriteShareGroupState"]
    assert KINDS["marker-hold-failover"].check_params({"wait_s": 3}).apis == ["WriteTxnMarkers"]
    with pytest.raises(ValueError, match="holds WriteShareGroupState between brokers"):
        FaultsSpec.model_validate({"mix": [{"kind": "share-write-hold-failover",
                                            "params": {"apis": ["WriteTxnMarkers"]}}]})
    with pytest.raises(ValueError, match="target"):
        FaultsSpec.model_validate({"mix": [{"kind": "share-write-hold-failover", "target": "leader-output"}]})


def test_a_share_coordinator_target_between_brokers_prefers_a_leader_on_another_broker():
    """A share partition leader's state writes to a coordinator on its own broker cross no link:
    a fault between brokers aims at a partition whose leader is elsewhere, when there is one."""
    import random
    from types import SimpleNamespace

    from kchaos.faults.base import FaultContext, resolve_node_target
    from kchaos.workloads.spec import WorkloadSpec

    leaders, coordinators = {0: 1, 1: 2, 2: 3}, {0: 1, 1: 2, 2: 1}  # only partition 2's leader is remote
    cluster = SimpleNamespace(brokers=[SimpleNamespace(node_id=n) for n in (1, 2, 3)],
                              partition_metadata=lambda topic: {p: SimpleNamespace(leader=l) for p, l in leaders.items()},
                              share_coordinator=lambda group, topic, p: coordinators[p])
    ctx = FaultContext(cluster, SimpleNamespace(spec=WorkloadSpec(kind="share", workers=2, input_partitions=3)))
    for seed in range(20):
        resolved = resolve_node_target(ctx, "share-coordinator", random.Random(seed), remote_writer=True)
        assert (resolved["detail"]["partition"], resolved["nodes"], resolved["detail"]["leader"]) == (2, [1], 3)
    seen = {resolve_node_target(ctx, "share-coordinator", random.Random(s))["detail"]["partition"] for s in range(20)}
    assert seen == {0, 1, 2}  # without it, any partition


def test_per_phase_plans_each_stretch_between_steps_from_the_first_entry_of_the_order():
    """With steps at 30 s and 70 s (two at 30: back to back), each stretch starts over at the step's
    time and at the order's first entry, and knows how many steps come before it."""
    spec = _spec(order="round-robin", per_phase=True, gap_s=1, start_after_s=2)
    schedule = generate_schedule(spec, 100, seed=9, step_starts=[70, 30, 30])
    by_phase = {p: [f for f in schedule if f.phase == p] for p in (0, 2, 3)}
    assert [f.index for f in schedule] == list(range(len(schedule))) and {f.phase for f in schedule} == {0, 2, 3}
    assert [f.at_s for f in by_phase[2]][0] == 30 and [f.at_s for f in by_phase[3]][0] == 70
    cycle = [(f.kind, f.target) for f in by_phase[0][:3]]
    for phase, planned in by_phase.items():
        assert [(f.kind, f.target) for f in planned[:3]] == cycle, phase  # each stretch: the order from the top
        assert all(f.at_s < {0: 30, 2: 70, 3: 100}[phase] and f.at_s + f.hold_s <= 100 for f in planned)
    # without per_phase (or without steps) the schedule is the whole-run one, as before: seeds replay
    whole = generate_schedule(_spec(order="round-robin", gap_s=1, start_after_s=2), 100, seed=9, step_starts=[30, 70])
    assert whole == generate_schedule(_spec(order="round-robin", gap_s=1, start_after_s=2), 100, seed=9)
    assert {f.phase for f in whole} == {None} and generate_schedule(spec, 100, seed=9) == [
        ScheduledFault(**{**f.to_json(), "phase": None}) for f in whole]
