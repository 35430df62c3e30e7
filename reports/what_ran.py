"""What a run tested, in words: the client and the workload lines of the report (and the
client ``results.json`` names), read from the campaign the run recorded.

kchaos' own workers, a Kafka Streams application and a user's app (``external_command``) all
fill the same ``[workload]`` table; these lines name which of them ran. The seeder, which writes
the input, is kchaos' confluent-kafka producer in every case: named apart, since it is not what
is under test.
"""

from __future__ import annotations

from pathlib import PurePath
from typing import Sequence

from kchaos.workloads.java_client import STREAMS_GUARANTEE
from kchaos.workloads.native_clients import CLIENTS as NATIVE_CLIENTS
from kchaos.workloads.registry import library_label
from kchaos.workloads.spec import WorkloadSpec

#: shells whose ``-c SCRIPT NAME`` form names the app in its fourth word (``$0``)
_SHELLS = {"sh", "bash", "dash", "zsh", "ksh"}


def app_name(command: Sequence[str]) -> str:
    """A user's app by name: the program, or for ``sh -c SCRIPT NAME`` the name the script was
    given (``$0``; ``campaigns/byo-copier.toml`` gives ``byo-copier``)."""
    if len(command) >= 2 and PurePath(command[0]).name in _SHELLS and command[1] == "-c":
        return command[3] if len(command) > 3 else f"a {PurePath(command[0]).name} script"
    return PurePath(command[0]).name


NATIVE_WORKER_NOTE = " (kchaos' worker on that client, docs/clients.md)"


def native_library_ran(workers: str | None) -> str | None:
    """The client library and release a native-client run recorded (environment.json's
    ``workers``, written by ``workers_client``), or None for any other workers."""
    if workers and workers.endswith(NATIVE_WORKER_NOTE):
        return workers[: -len(NATIVE_WORKER_NOTE)]
    return None


def workers_client(workload: WorkloadSpec, confluent: str) -> str:
    """What ran as the workers, by client library and release (workloads/registry.py):
    ``confluent`` is the installed confluent-kafka, as ``confluent-kafka 2.16.1 (librdkafka 2.16.1)``.
    A fleet names each client and release with its slots."""
    if workload.external_command:
        jars = f"; its classpath {', '.join(workload.external_classpath)}" if workload.external_classpath else ""
        return f"the user's app {app_name(workload.external_command)} (external_command{jars})"
    if workload.client == "streams":
        return f"Kafka Streams {workload.java_client_version} (kafka-streams, its kafka-clients)"

    def library(client: str, version: str) -> str:
        return confluent if client == "confluent" else library_label(client, version)

    groups = workload.fleet_groups()
    if workload.client == "mixed" and len(groups) == 2:
        return f"{confluent} (even worker slots) and {library('java', workload.java_client_version)} (odd worker slots)"
    if workload.client != "fleet" and len(groups) == 1:
        slot = groups[0][0]
        return library(slot.client, slot.version) + (NATIVE_WORKER_NOTE if slot.client in NATIVE_CLIENTS else "")
    return "; ".join(f"{library(slot.client, slot.version)} ({', '.join(slots)}"
                     + (f": {NATIVE_WORKER_NOTE.strip(' ()')}" if slot.client in NATIVE_CLIENTS else "") + ")"
                     for slot, slots in groups)


def workload_line(workload: WorkloadSpec) -> str:
    """The pipeline, its size and its guarantees, as whoever ran it sets them."""
    if workload.kind == "txn":  # no inputs, outputs or group: its transactions send to and poll shared keys
        return (f"txn, transactions of 1 to {workload.txn_max_ops} sends and polls ({workload.txn_poll_fraction:g} "
                f"polls) on the {workload.txn_partitions} partitions of {workload.txn_topic}, shared by "
                f"{workload.workers} kchaos workers (confluent-kafka), at most {workload.txn_rate:g} transactions/s "
                f"each; consumers assigned, isolation {workload.isolation}; {workload.abort_fraction:g} aborted on "
                "purpose")
    group = {"classic": "consumer group", "consumer": "consumer group (KIP-848)",
             "streams": "streams group (KIP-1071)"}[workload.group_protocol]
    kind = {"ctp": f"consume-transform-produce on a {group}", "share": "a share-group (KIP-932) pipeline"}[workload.kind]
    if workload.external_command:
        who = f"{workload.workers} instances of the user's app {app_name(workload.external_command)}"
        how = (f"delivery and isolation as the app sets them; lineage {workload.lineage}"
               + (f" (the input's id in the output's {workload.lineage_id})" if workload.lineage == "id" else ""))
    elif workload.client == "streams":
        who = (f"{workload.workers} Kafka Streams instances ({workload.streams_threads} stream thread"
               f"{'s' if workload.streams_threads > 1 else ''} each)")
        how = (f"processing.guarantee {STREAMS_GUARANTEE.get(workload.delivery, workload.delivery)}, "
               f"group.protocol {workload.group_protocol}, Streams' own transactional ids")
    else:
        who = f"{workload.workers} kchaos workers"
        how = (f"delivery {workload.delivery}, isolation {workload.isolation}, transactional ids "
               f"{workload.transactional_id_strategy}"
               + (f", group.protocol {workload.group_protocol}" if workload.kind == "ctp" else ""))
    outputs = f"{workload.outputs_per_input} output{'s' if workload.outputs_per_input > 1 else ''}"
    inputs = (f"{workload.records} inputs" if workload.records is not None
              else "inputs for the whole workload phase")
    return (f"{workload.kind}, {kind}: {inputs} at {workload.rate:g}/s, {who}, "
            f"{workload.input_partitions} input partitions, {outputs} per input to "
            f"{', '.join(workload.output_topics)}; {how}")


def seeder_client(confluent: str) -> str:
    return f"kchaos' seeder writes the input with {confluent}"
