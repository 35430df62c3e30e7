"""Faults on a cluster kchaos did not start, without a cluster: the commands each preset renders
(docker, ssh, kubernetes: no Kubernetes runs here, so these are its only tests), what a missing
command refuses and why, the iptables chain's commands run in a real shell, the heal journal, and
the safety checks made when a campaign is loaded."""

from __future__ import annotations

import json
import shlex
import subprocess

import pytest

from kchaos.clusters import backend_capabilities
from kchaos.clusters.base import Capability
from kchaos.clusters.external.cluster import capability_gap
from kchaos.clusters.external.firewall import CHAIN, cut_peer, remove_chain
from kchaos.clusters.external.node_access import NodeAccess, grep_pattern
from kchaos.clusters.spec import ClusterSpec
from kchaos.errors import CapabilityError, ConfigError
from kchaos.faults.spec import FaultsSpec, check_capabilities
from kchaos.runtime.heal_journal import HealJournal, heal_pending

NODES = [{"id": i, "host": f"10.9.0.{10 + i}", "target": f"kafka-{i}"} for i in (1, 2, 3)]


def external(access: str, **extra) -> ClusterSpec:
    ext = {"bootstrap_servers": "10.9.0.11:9092", "access": access, "nodes": NODES, **extra}
    return ClusterSpec.load({"backend": "external", "external": ext})


def argv(shell: str) -> list[str]:
    return shlex.split(shell)


def test_docker_preset_renders_the_engine_commands_and_runs_node_commands_in_the_containers_namespace():
    access = NodeAccess(external("docker", options="-H unix:///run/compose.sock").external)
    assert argv(access.render("kill", 2).shell) == ["docker", "-H", "unix:///run/compose.sock", "kill", "--signal",
                                                    "KILL", "kafka-2"]
    assert argv(access.render("pause", 1).shell)[-2:] == ["pause", "kafka-1"]
    assert argv(access.render("resume", 1).shell)[-2:] == ["unpause", "kafka-1"]
    assert argv(access.render("start", 3).shell)[-2:] == ["start", "kafka-3"]
    shell = access.render("exec", 1, cmd="iptables -w -S").shell
    # the node command is one argument of sh -c, in the network namespace of the container's process
    assert shell.startswith("nsenter -t \"$(docker -H unix:///run/compose.sock inspect -f '{{.State.Pid}}' kafka-1)\"")
    assert argv(shell)[-3:] == ["sh", "-c", "iptables -w -S"]


def test_ssh_preset_signals_the_broker_without_matching_its_own_shell_and_needs_a_service_to_start():
    spec = external("ssh", options="-i /keys/id -o BatchMode=yes",
                    nodes=[{**NODES[0], "target": "root@10.9.0.11", "service": "kafka"}, NODES[1], NODES[2]])
    access = NodeAccess(spec.external)
    kill = argv(access.render("kill", 1).shell)
    assert kill[:5] == ["ssh", "-i", "/keys/id", "-o", "BatchMode=yes"] and kill[5] == "root@10.9.0.11"
    # the remote command is one argument; the pattern is bracketed so pkill never matches the shell running it
    assert argv(kill[6]) == ["pkill", "-KILL", "-f", "[k]afka.Kafka"]
    assert argv(argv(access.render("start", 1).shell)[6]) == ["systemctl", "start", "kafka"]
    assert access.missing("start", 1) is None
    assert "nodes[].service" in access.missing("start", 2)
    assert "nodes[].service" in capability_gap(spec, Capability.KILL)


def test_a_grep_pattern_never_matches_the_command_line_that_carries_it():
    import re

    for pattern in ("kafka.Kafka", "/srv/node-1/server.properties", "Kafka (broker)"):
        regex = grep_pattern(pattern)
        assert re.search(regex, f"java -cp x {pattern} y")
        assert not re.search(regex, f"sh -c 'pkill -KILL -f {regex}'")


def test_kubernetes_preset_deletes_pods_waits_for_the_operator_and_refuses_what_a_pod_cannot_do():
    spec = external("kubernetes", options="-n kafka --context staging",
                    nodes=[{**n, "target": f"my-cluster-broker-{n['id']}"} for n in NODES])
    access = NodeAccess(spec.external)
    assert argv(access.render("kill", 1).shell) == ["kubectl", "-n", "kafka", "--context", "staging", "delete", "pod",
                                                    "my-cluster-broker-1", "--grace-period=0", "--force", "--wait=false"]
    assert "--wait=true" in access.render("terminate", 1).shell
    start = access.render("start", 2).shell
    assert "kubectl -n kafka --context staging wait --for=condition=Ready pod/my-cluster-broker-2" in start
    assert argv(access.render("logs", 3).shell)[-2:] == ["logs", "my-cluster-broker-3"]
    # pause: PID 1 of a pod ignores a SIGSTOP from kubectl exec; partitions need a netadmin image
    assert "PID 1" in access.missing("pause", 1)
    assert "netadmin_image" in access.missing("exec", 1)
    caps = backend_capabilities(spec)
    assert caps == {Capability.KILL, Capability.TERMINATE, Capability.RESTART, Capability.LOGS}
    with_debug = NodeAccess(external("kubernetes", netadmin_image="nicolaka/netshoot:v0.13").external)
    shell = with_debug.render("exec", 1, cmd=remove_chain()).shell
    assert argv(shell)[:8] == ["kubectl", "debug", "kafka-1", "--profile=netadmin", "--image=nicolaka/netshoot:v0.13",
                               "--attach=true", "--quiet", "--"]
    assert Capability.PARTITION in backend_capabilities(external("kubernetes", netadmin_image="img"))


def test_commands_of_ones_own_replace_the_presets_and_node_commands_go_through_exec():
    spec = external("commands", commands={"exec": "ip netns exec ns-{node_id} sh -c {cmd}",
                                          "kill": "node: kill -9 $(cat /run/kafka-{node_id}.pid)"})
    access = NodeAccess(spec.external)
    assert access.render("kill", 2).shell == "ip netns exec ns-2 sh -c 'kill -9 $(cat /run/kafka-2.pid)'"
    assert backend_capabilities(spec) == {Capability.PARTITION}
    assert "no 'start' command" in capability_gap(spec, Capability.KILL)
    with pytest.raises(CapabilityError, match="no 'pause' command"):
        access.render("pause", 1)


def test_values_are_quoted_so_a_hostile_name_stays_one_argument():
    spec = external("docker", nodes=[{"id": 1, "host": "10.9.0.11", "target": "kafka-1; rm -rf /"}])
    assert argv(NodeAccess(spec.external).render("kill", 1).shell)[-1] == "kafka-1; rm -rf /"


def test_spec_refuses_unknown_actions_secrets_in_templates_and_twice_declared_nodes():
    with pytest.raises(ConfigError, match="unknown action"):
        external("docker", commands={"reboot": "x"})
    with pytest.raises(ConfigError, match="heal journal"):
        external("ssh", commands={"exec": "sshpass -p ${ENV:PW} ssh {target} {cmd}"})
    with pytest.raises(ConfigError, match="host 10.9.0.11 is declared twice"):
        external("docker", nodes=[NODES[0], {**NODES[1], "host": "10.9.0.11"}])
    with pytest.raises(ConfigError, match="needs \\[\\[cluster.external.nodes\\]\\]"):
        ClusterSpec.load({"backend": "external", "external": {"bootstrap_servers": "x:1", "access": "ssh"}})


def test_faults_on_an_external_cluster_need_allow_faults_and_the_cluster_id():
    faults = FaultsSpec.model_validate({"mix": [{"kind": "kill", "target": "txn-coordinator"}]})
    with pytest.raises(ConfigError, match="allow_faults = true and its cluster_id"):
        check_capabilities(faults, external("docker"))
    with pytest.raises(ConfigError, match="allow_faults"):
        check_capabilities(faults, external("docker", cluster_id="abc"))
    check_capabilities(faults, external("docker", cluster_id="abc", allow_faults=True))
    # no access: refused naming why, before the safety question
    with pytest.raises(CapabilityError, match="access is 'none'"):
        check_capabilities(faults, ClusterSpec.load({"backend": "external", "external": {"bootstrap_servers": "x:1"}}))
    # client-link toxics need the front, which external clusters do not have yet: said so
    latency = FaultsSpec.model_validate({"mix": [{"kind": "latency", "target": "all-clients"}]})
    with pytest.raises(CapabilityError, match="front"):
        check_capabilities(latency, external("docker", cluster_id="abc", allow_faults=True))


def test_the_chain_commands_are_idempotent_and_touch_no_other_chain(tmp_path):
    """The rendered iptables lines run by a real shell against a recording iptables: rules go to
    KCHAOS only; removal deletes the jumps and the chain and never flushes INPUT or OUTPUT."""
    log = tmp_path / "calls"
    fake = tmp_path / "bin"
    fake.mkdir()
    for name in ("iptables", "ip6tables"):
        (fake / name).write_text(f"#!/bin/sh\necho \"{name} $*\" >> {log}\n"
                                 # -C (check) and -L (list) find nothing; -D finds nothing: a healed node
                                 "case \"$*\" in *' -C '*|*' -L '*|*' -D '*) exit 1;; esac\nexit 0\n")
        (fake / name).chmod(0o755)
    env = {"PATH": f"{fake}:/usr/bin:/bin"}
    assert subprocess.run(["/bin/sh", "-c", cut_peer("10.9.0.12")], env=env).returncode == 0
    calls = log.read_text().splitlines()
    assert f"iptables -w -N {CHAIN}" in calls
    assert f"iptables -w -I INPUT -j {CHAIN}" in calls and f"iptables -w -I OUTPUT -j {CHAIN}" in calls
    assert f"iptables -w -A {CHAIN} -s 10.9.0.12 -j DROP" in calls
    assert f"iptables -w -A {CHAIN} -d 10.9.0.12 -j DROP" in calls
    assert all(CHAIN in c for c in calls)  # nothing is added to, or removed from, another chain
    log.unlink()
    assert subprocess.run(["/bin/sh", "-c", remove_chain()], env=env).returncode == 0
    calls = log.read_text().splitlines()
    assert not any(" -F INPUT" in c or " -F OUTPUT" in c or c.endswith(" -F") for c in calls)
    assert f"iptables -w -F {CHAIN}" in calls and f"iptables -w -X {CHAIN}" in calls
    assert "ip6tables" in " ".join(calls) and cut_peer("fd00::2").startswith("ip6tables")


def test_the_journal_is_written_before_the_act_and_heals_what_is_pending_newest_first(tmp_path):
    journal = HealJournal(tmp_path / "heal-journal.jsonl")
    first = journal.acting(1, "partition", "cut", [{"action": "exec", "node": 1, "shell": "unchain-1"}])
    second = journal.acting(2, "kill", "kill-2", [{"action": "start", "node": 2, "shell": "start-2"}])
    journal.failed(second, "exit 1")  # a failed act may have half-happened: it stays to be undone
    third = journal.acting(3, "pause", "pause-3", [{"action": "resume", "node": 3, "shell": "resume-3"}])
    journal.healed(third, "healed by the run")
    with open(journal.path, "a") as f:
        f.write('{"act": {"id": 9, "node"')  # a SIGKILL mid-write: that act was not done yet
    assert [e.id for e in journal.pending()] == [first, second]
    assert journal.pending()[1].failed == "exit 1"
    ran = []
    report = heal_pending(journal, lambda undo: (ran.append(undo["shell"]) or undo["shell"] != "unchain-1", "said"),
                          "kchaos heal")
    assert ran == ["start-2", "unchain-1"]
    assert [(r["id"], r["healed"]) for r in report] == [(second, True), (first, False)]
    assert [e.id for e in journal.pending()] == [first]  # the failed undo waits for the next heal
    heal_pending(journal, lambda undo: (True, ""), "kchaos heal")
    assert journal.pending() == []
    records = [json.loads(line) for line in journal.path.read_text().splitlines() if line.endswith("}")]
    assert any(r.get("healed") == first and r["how"] == "kchaos heal" for r in records)


def test_a_command_that_leaves_a_process_holding_its_output_does_not_hang_until_the_timeout(caplog, tmp_path):
    """issue 61: a `start` template that backgrounds the broker without redirecting its output left
    the pipe open, and kchaos waited for its end until the 360 s timeout. The command is done when
    its shell exits; the held output is read a little longer, and kchaos says what to fix."""
    import logging
    import time

    from kchaos.runtime.node_commands import HELD_OUTPUT_S, NodeCommand, run_command
    from kchaos.log import LOGGER

    LOGGER.addHandler(caplog.handler)
    try:
        with caplog.at_level(logging.WARNING, logger="kchaos"):
            started = time.monotonic()
            done = run_command(NodeCommand("start", 1, f"echo started; sleep 60 & echo $! > {tmp_path}/held"), timeout_s=30)
            took = time.monotonic() - started
            assert done.returncode == 0 and done.stdout == "started\n"
            assert took < HELD_OUTPUT_S + 3, took
            assert "start command of node 1 ended, but left a process holding its output" in caplog.text
            caplog.clear()
            started = time.monotonic()
            redirected = run_command(NodeCommand("start", 2, f"echo ok; sleep 60 > /dev/null 2>&1 < /dev/null & "
                                                                f"echo $! > {tmp_path}/redirected"))
            assert redirected.stdout == "ok\n" and time.monotonic() - started < 1.5 and caplog.text == ""
            failed = run_command(NodeCommand("kill", 3, "echo no such process >&2; exit 1"), check=False)
            assert failed.returncode == 1 and failed.stderr == "no such process\n"
    finally:
        LOGGER.removeHandler(caplog.handler)
        for name in ("held", "redirected"):
            if (tmp_path / name).exists():
                subprocess.run(["kill", (tmp_path / name).read_text().strip()], check=False)


def test_heal_given_the_out_directory_names_the_runs_under_it_left_unhealed(tmp_path):
    """After a SIGKILL a user may give `kchaos heal` the --out directory instead of the run's: it
    found no journal there and said "nothing to heal". It now refuses and names the run."""
    from kchaos.cli import main as cli

    run = tmp_path / "runs" / "20261201T000000Z-mine-seed1"
    (run / "cluster").mkdir(parents=True)
    HealJournal(run / "cluster" / "heal-journal.jsonl").acting(2, "kill", "kill-2", [{"action": "start", "node": 2,
                                                                                      "shell": "true"}])
    args = cli.build_parser().parse_args(["heal", str(tmp_path / "runs")])
    with pytest.raises(ConfigError) as refused:
        args.func(args)
    assert "has no heal journal" in refused.value.one_line() and str(run) in refused.value.one_line()
    args = cli.build_parser().parse_args(["heal", str(run)])
    assert args.func(args) == 0 and not HealJournal(run / "cluster" / "heal-journal.jsonl").pending()
