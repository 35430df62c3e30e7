"""Kafka's own command-line tools, run from the resolved jars (no tarball, no shell scripts).

Main classes move between releases (``DumpLogSegments`` moved to ``org.apache.kafka.tools`` in
4.3); :func:`tool_main_class` picks the right one for a version.
"""

from __future__ import annotations

import importlib.resources
import re
import shlex
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from kchaos.errors import ClusterError, SetupError
from kchaos.runtime.artifacts import JarSet, has_own_tools, require_java, resolve_kafka, resolve_kafka_tools
from kchaos.runtime.java_build import compiled_classes


class ToolTarget(Protocol):
    """What Kafka's tools need of a cluster (every Cluster is one): where to connect and how."""

    @property
    def bootstrap_servers(self) -> str: ...

    def java_client_config_file(self) -> Path | None: ...


_TOOL_JVM_OPTS = ["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto"]


def _version_tuple(version: str) -> tuple[int, int, int]:
    a, b, c = (int(x) for x in version.split("."))
    return a, b, c


def tool_main_class(tool: str, version: str) -> str:
    v = _version_tuple(version)
    classes = {
        "storage": "kafka.tools.StorageTool",
        "features": "org.apache.kafka.tools.FeatureCommand",
        "quorum": "org.apache.kafka.tools.MetadataQuorumCommand",
        "transactions": "org.apache.kafka.tools.TransactionsCommand",
        "configs": "kafka.admin.ConfigCommand" if v < (4, 2, 0) else "org.apache.kafka.tools.ConfigCommand",
        "dump-log": "org.apache.kafka.tools.DumpLogSegments" if v >= (4, 3, 0) else "kafka.tools.DumpLogSegments",
        "producer-perf": "org.apache.kafka.tools.ProducerPerformance",
        "streams-groups": "org.apache.kafka.tools.streams.StreamsGroupCommand",
    }
    if tool not in classes:
        raise ValueError(f"unknown tool {tool!r}; known: {', '.join(classes)}")
    return classes[tool]


@dataclass(frozen=True)
class ToolResult:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str


#: Tools that read or write the broker's on-disk format: only the broker's own release may run them.
ON_DISK_TOOLS = frozenset({"storage", "dump-log"})


def tool_jars(tool: str, version: str) -> tuple[JarSet, str]:
    """The jars (and their release) to run ``tool`` for a ``version`` cluster with.

    StorageTool is in the broker's own jars (kafka_2.13). DumpLogSegments reads segment files,
    so it must be the broker's release too: when that release's kafka-tools does not resolve
    (4.4.0 here) it is not used at all. Tools that only speak the wire protocol (features,
    transactions, quorum, configs, perf) may come from the newest older kafka-tools; what that
    can get wrong is release-specific output, e.g. FeatureCommand's version-mapping (see
    docs/clusters.md, "Kafka releases and their tools")."""
    if tool in ON_DISK_TOOLS:
        jars = resolve_kafka(version)
        if tool == "dump-log" and _version_tuple(version) >= (4, 3, 0) and not has_own_tools(jars):
            raise ClusterError(f"DumpLogSegments of Kafka {version} is not available (kafka-tools {version} does not "
                               "resolve), and another release's must not read this broker's segment files")
        return jars, version
    return resolve_kafka_tools(version)


def run_tool(tool: str, args: list[str], version: str, jars: JarSet | None = None,
             timeout_s: float = 120.0, check: bool = True, log4j_config: Path | None = None,
             logs_dir: Path | None = None) -> ToolResult:
    """``log4j_config`` (the brokers' own) names its files under ``kafka.logs.dir``: ``logs_dir``
    sets it; unset, log4j would create a directory literally named ``${sys:kafka.logs.dir}`` in
    the working directory."""
    if (log4j_config is None) != (logs_dir is None):
        raise ValueError("log4j_config and logs_dir go together")
    argv = tool_argv(tool, args, version, jars, log4j_config, logs_dir)
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        raise ClusterError(f"kafka tool {tool} {' '.join(args[:3])} timed out after {timeout_s:.0f}s") from exc
    result = ToolResult(argv, proc.returncode, proc.stdout, proc.stderr)
    if check and proc.returncode != 0:
        raise ClusterError(f"kafka tool {tool} {args[0] if args else ''} failed: {java_error_summary(proc.stdout + proc.stderr)}",
                           detail=(proc.stdout + proc.stderr)[-3000:])
    return result


def tool_argv(tool: str, args: list[str], version: str, jars: JarSet | None = None,
              log4j_config: Path | None = None, logs_dir: Path | None = None) -> list[str]:
    """The command line that runs ``tool`` for a ``version`` cluster (what :func:`run_tool` runs)."""
    tools_version = version
    if jars is None:
        jars, tools_version = tool_jars(tool, version)
    argv = [require_java(), *_TOOL_JVM_OPTS, "-cp", jars.classpath]
    if log4j_config is not None:
        argv += [f"-Dlog4j2.configurationFile={log4j_config}", f"-Dlog4j.configuration=file:{log4j_config.with_suffix('.properties')}",
                 f"-Dkafka.logs.dir={logs_dir}"]
    return [*argv, tool_main_class(tool, tools_version), *args]


def java_error_summary(output: str) -> str:
    """The line of a JVM's output that says what went wrong (``XException: message``)."""
    for line in output.splitlines():
        match = re.search(r"(\w+(?:Exception|Error)): (.+)$", line)
        if match and not line.lstrip().startswith("at "):
            return f"{match.group(1)}: {match.group(2).strip()}"
    lines = [line for line in output.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else "no output"


def tool_args(cluster: ToolTarget) -> tuple[list[str], str]:
    version = getattr(cluster, "kafka_version", None)
    if version is None:
        raise ClusterError("this cluster does not say which Kafka version its tools should come from")
    security = cluster.java_client_config_file()
    return ["--bootstrap-server", cluster.bootstrap_servers, *(["--command-config", str(security)] if security else [])], version


def describe_quorum_leader(cluster: ToolTarget) -> int:
    args, version = tool_args(cluster)
    out = run_tool("quorum", [*args, "describe", "--status"], version).stdout
    match = re.search(r"^LeaderId:\s+(-?\d+)", out, re.M)
    if not match:
        raise ClusterError("MetadataQuorumCommand printed no LeaderId", detail=out[-2000:])
    return int(match.group(1))


def describe_features(cluster: ToolTarget) -> dict[str, int]:
    """Finalized feature levels, e.g. ``{"metadata.version": 27, "transaction.version": 2}``."""
    args, version = tool_args(cluster)
    out = run_tool("features", [*args, "describe"], version).stdout
    levels = {}
    for match in re.finditer(r"Feature:\s*(\S+)\s+SupportedMinVersion:.*?FinalizedVersionLevel:\s*(\S+)", out):
        name, level = match.group(1), match.group(2)
        if level.isdigit():
            levels[name] = int(level)
        else:  # metadata.version prints as e.g. 4.2-IV1
            levels[name] = level  # type: ignore[assignment]
    return levels


def finalized_level(levels: dict[str, Any], feature: str) -> int | None:
    """``feature``'s finalised level in :func:`describe_features`' answer: 0 where none is finalised
    (FeatureCommand prints 0, and a broker that does not know the feature runs without it), None
    where the tool names the level instead of numbering it (metadata.version: ``4.2-IV1``)."""
    level = levels.get(feature, 0)
    return level if isinstance(level, int) else None


def upgrade_feature(cluster: ToolTarget, feature: str, level: int, downgrade: bool = False) -> None:
    args, version = tool_args(cluster)
    run_tool("features", feature_change_args(args, feature, level, downgrade), version)


def feature_change_args(args: list[str], feature: str, level: int, downgrade: bool) -> list[str]:
    """FeatureCommand's arguments that set ``feature`` to ``level`` (``args``: the connection's, as
    :func:`tool_args` gives them)."""
    return [*args, "downgrade" if downgrade else "upgrade", "--feature", f"{feature}={level}"]


def feature_restore_shell(tool: list[str], args: list[str], feature: str, level: int, downgrade_first: bool) -> str:
    """One shell line that puts ``feature`` back to ``level`` from whatever level it has when it
    runs (``tool``: FeatureCommand's command line without arguments, ``tool_argv("features", [],
    version)``): its downgrade, else its upgrade (a level above ``level`` needs the first, one below
    the second; at ``level`` already, the controller accepts either and changes nothing), so
    running it twice is harmless. For the heal journal: the harness that would know the level then
    may be dead."""
    first, second = (shlex.join([*tool, *feature_change_args(args, feature, level, downgrade)])
                     for downgrade in ((True, False) if downgrade_first else (False, True)))
    return f"{first} || {second}"


def parse_tool_table(text: str) -> list[dict[str, str]]:
    """Rows of a whitespace-aligned table printed by a Kafka tool (first line: the header)."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return []
    header = lines[0].split()
    return [dict(zip(header, (v.strip() for v in line.split(None, len(header) - 1)))) for line in lines[1:]]


#: TransactionsCommand's invocations in one JVM (kchaos/runtime/java/KchaosTransactionsBatch.java,
#: package data): a JVM start costs about as much CPU as the query itself
TRANSACTIONS_BATCH = "KchaosTransactionsBatch"
_BATCH_SOURCE = Path(str(importlib.resources.files("kchaos.runtime").joinpath("java"))) / f"{TRANSACTIONS_BATCH}.java"
_BATCH_UNSUPPORTED = 3  # the batch's exit code when these tools' command cannot be called in it


def run_transactions_batch(argvs: list[list[str]], version: str, timeout_s: float = 120.0) -> tuple[list[ToolResult], str]:
    """Each of ``argvs`` answered as ``run_tool("transactions", argv, version, check=False)``
    would answer it, and how they were run. One JVM answers them all, concurrently, where it
    can; an invocation it did not answer (no JDK to compile it, tools whose command it cannot
    call, a JVM that died) runs in a JVM of its own, two at a time, as before. When the batch
    times out, the queries it answered keep their answers and the others say they timed out:
    they are not run again, as a cluster that did not answer in time would not now."""
    answered: list[ToolResult | None] = [None] * len(argvs)
    how = "one JVM"
    try:
        answered, unanswered = _transactions_batch(argvs, version, timeout_s)
    except ClusterError as exc:
        return [ToolResult(argv, -1, "", exc.one_line()) for argv in argvs], how
    except (SetupError, OSError) as exc:  # no JDK, or the batch could not be built: the queries still run
        how = f"one JVM per query: {exc.one_line() if isinstance(exc, SetupError) else repr(exc)}"
    else:
        alone_count = sum(result is None for result in answered)
        if alone_count == len(argvs):
            how = f"one JVM per query: {unanswered}"
        elif alone_count:
            how = f"one JVM, and one each for the {alone_count} it did not answer ({unanswered})"
    alone = [i for i, result in enumerate(answered) if result is None]

    def run_alone(argv: list[str]) -> ToolResult:
        try:
            return run_tool("transactions", argv, version, timeout_s=90, check=False)
        except ClusterError as exc:
            return ToolResult(argv, -1, "", exc.one_line())

    with ThreadPoolExecutor(max_workers=2) as pool:
        for i, result in zip(alone, pool.map(run_alone, [argvs[i] for i in alone])):
            answered[i] = result
    return [r for r in answered if r is not None], how


def transactions_batch_classes() -> Path:
    """The batch compiled (once, into the cache); it names no Kafka class at compile time, so one
    build serves every release's tools. A SetupError without a JDK."""
    return compiled_classes(TRANSACTIONS_BATCH, [_BATCH_SOURCE], "", "", "kchaos' batch of KIP-664 queries",
                            "a JDK's javac compiles it once; without one, each query starts its own JVM")


def _transactions_batch(argvs: list[list[str]], version: str, timeout_s: float) -> tuple[list[ToolResult | None], str]:
    """Each invocation's answer from one JVM, None for one it did not answer, and why not."""
    jars, _ = tool_jars("transactions", version)
    classes = transactions_batch_classes()
    with tempfile.TemporaryDirectory(prefix="kchaos-transactions-") as out:
        head = [require_java(), *_TOOL_JVM_OPTS, "-cp", f"{classes}:{jars.classpath}", TRANSACTIONS_BATCH, out]
        argv = head + [word for args in argvs for word in ("--", *args)]
        timed_out = None
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:  # the queries that answered keep their answers
            timed_out = f"kafka tool transactions timed out after {timeout_s:.0f}s (one JVM for {len(argvs)} queries)"
        else:
            if proc.returncode == _BATCH_UNSUPPORTED:
                return [None] * len(argvs), "these tools' TransactionsCommand cannot be called in a batch"
        answered: list[ToolResult | None] = []
        for i, args in enumerate(argvs):
            exit_file = Path(out) / f"{i}.exit"
            code, _, message = exit_file.read_text().partition("\n") if exit_file.exists() else ("", "", "")
            if code.lstrip("-").isdigit():  # written whole (a JVM killed while writing leaves less)
                answered.append(ToolResult([*head, *args], int(code), (Path(out) / f"{i}.out").read_text(), message))
            elif timed_out:
                answered.append(ToolResult([*head, *args], -1, "", timed_out))
            else:  # the JVM ended before this invocation did
                answered.append(None)
        if timed_out:
            return answered, timed_out
        return answered, f"the batch's JVM ended with exit {proc.returncode}: {java_error_summary(proc.stderr)}"


def broker_transaction_state(cluster: ToolTarget, broker_ids: list[int],
                             pinned: list[tuple[str, int]] | None = None) -> dict[str, Any]:
    """The brokers' own view of transactions after heal (KIP-664 admin APIs, through
    ``TransactionsCommand``): every transaction the coordinators know (``list``), per broker the
    transactions its partitions consider hanging (``find-hanging``) and, for partitions whose
    LSO stayed pinned, the producers the partition leader tracks (``describe-producers``)."""
    args, version = tool_args(cluster)
    calls = {"list": [*args, "list"]}
    calls.update({f"find-hanging:{b}": [*args, "find-hanging", "--broker-id", str(b)] for b in broker_ids})
    calls.update({f"describe-producers:{t}-{p}": [*args, "describe-producers", "--topic", t, "--partition", str(p)]
                  for t, p in (pinned or [])[:10]})
    results, how = run_transactions_batch(list(calls.values()), version)
    answers = {name: ({"rows": parse_tool_table(r.stdout)} if r.returncode == 0
                      else {"error": java_error_summary(r.stdout + r.stderr)}) for name, r in zip(calls, results)}
    hanging_rows = [row | {"broker": name.split(":")[1]} for name, a in answers.items()
                    if name.startswith("find-hanging") for row in a.get("rows", [])]
    producers = {name.split(":", 1)[1]: a.get("rows", a.get("error")) for name, a in answers.items()
                 if name.startswith("describe-producers")}
    return {"transactions": answers["list"].get("rows"), "list_error": answers["list"].get("error"),
            "hanging": hanging_rows, "producers_of_pinned_partitions": producers,
            "hanging_errors": {name: a["error"] for name, a in answers.items()
                               if "error" in a and name.startswith("find-hanging")},
            "queried_with": how}


def abort_open_transactions(cluster: ToolTarget, partitions: list[tuple[str, int]]) -> list[dict[str, Any]]:
    """KIP-664's way out of a hanging transaction: for each partition, the producers its leader
    says have a transaction open (``describe-producers``: CurrentTransactionStartOffset), each
    aborted with ``TransactionsCommand abort --start-offset`` (the admin client writes the abort
    marker itself). Call it only once every legitimate transaction has had its timeout to end:
    it aborts whatever is open. Returns what was tried, per transaction."""
    args, version = tool_args(cluster)
    out: list[dict[str, Any]] = []
    for topic, partition in partitions:
        where = ["--topic", topic, "--partition", str(partition)]
        described = run_tool("transactions", [*args, "describe-producers", *where], version, timeout_s=90, check=False)
        if described.returncode != 0:
            out.append({"partition": f"{topic}-{partition}", "outcome": "not described",
                        "error": java_error_summary(described.stdout + described.stderr)})
            continue
        for row in parse_tool_table(described.stdout):
            start_text = row.get("CurrentTransactionStartOffset") or ""
            if not start_text.isdigit():  # "None", or -1: no transaction open
                continue
            start = int(start_text)
            aborted = run_tool("transactions", [*args, "abort", *where, "--start-offset", str(start)], version,
                               timeout_s=90, check=False)
            out.append({"partition": f"{topic}-{partition}", "producer_id": row.get("ProducerId"),
                        "producer_epoch": row.get("ProducerEpoch"), "start_offset": start,
                        "outcome": "aborted" if aborted.returncode == 0 else "failed",
                        **({"error": java_error_summary(aborted.stdout + aborted.stderr)}
                           if aborted.returncode != 0 else {})})
    return out


#: a streams group's states as StreamsGroupCommand prints them
_STREAMS_GROUP_STATE = re.compile(r"\b(Empty|NotReady|Not_Ready|Assigning|Reconciling|Stable|Dead)\b", re.I)


def describe_streams_group(cluster: ToolTarget, group: str, input_topic: str) -> dict[str, Any]:
    """A KIP-1071 streams group as its coordinator sees it (``StreamsGroupCommand --describe``):
    its state, and per member its client id, epochs and the input partitions of the active tasks
    the coordinator assigns it (a one-subtopology topology reading ``input_topic``: task
    ``0_p`` reads partition ``p``). The tool's own text is kept beside the parse (``text``)."""
    args, version = tool_args(cluster)
    state = run_tool("streams-groups", [*args, "--describe", "--state", "--group", group], version,
                     timeout_s=60, check=True).stdout
    members = run_tool("streams-groups", [*args, "--describe", "--members", "--verbose", "--group", group], version,
                       timeout_s=60, check=True).stdout
    found = _STREAMS_GROUP_STATE.search("\n".join(state.splitlines()[1:]))
    return {"state": found.group(1) if found else None, "members": parse_streams_members(members),
            "text": (state + members)[-4000:], "input_topic": input_topic}


def parse_streams_members(text: str) -> list[dict[str, Any]]:
    """The member rows of ``StreamsGroupCommand --describe --members --verbose``: columns cut at
    the header's positions (the tool pads them), the assignment column parsed for the active
    tasks (``ACTIVE: 0:[0,5];``, not ``TARGET-ACTIVE``) and the target ones."""
    lines = [line for line in text.splitlines() if line.strip()]
    header_at = next((i for i, line in enumerate(lines) if "MEMBER" in line.split()), None)
    if header_at is None:
        return []
    header = lines[header_at]
    starts = [m.start() for m in re.finditer(r"\S+(?: \(\S+\))?", header)]
    names = [header[a:b].strip() for a, b in zip(starts, [*starts[1:], None])]
    out = []
    for line in lines[header_at + 1:]:
        if line.split()[0:1] == header.split()[0:1]:
            continue  # a second header
        cells = {n: line[a:b].strip() if b is not None else line[a:].strip()
                 for n, a, b in zip(names, starts, [*starts[1:], None])}
        rest = line[starts[names.index("ASSIGNMENTS")]:] if "ASSIGNMENTS" in names else line
        out.append({"member_id": cells.get("MEMBER"), "client_id": cells.get("CLIENT-ID"),
                    "member_epoch": cells.get("MEMBER-EPOCH"), "target_assignment_epoch":
                    cells.get("TARGET-ASSIGNMENT-EPOCH"),
                    "partitions": _task_partitions(rest, "ACTIVE"),
                    "target_partitions": _task_partitions(rest, "TARGET-ACTIVE")})
    return out


def _task_partitions(text: str, kind: str) -> list[int] | None:
    """The partitions of the tasks listed after ``kind:`` (``0:[0,5]; 1:[2];``), or None when the
    column does not say."""
    match = re.search(r"(?<![-\w])" + re.escape(kind) + r":\s*((?:\d+:\[[\d,\s]*\];?\s*)*)", text)
    if match is None:
        return None
    return sorted({int(p) for _, parts in re.findall(r"(\d+):\[([\d,\s]*)\]", match.group(1))
                   for p in parts.replace(" ", "").split(",") if p})
