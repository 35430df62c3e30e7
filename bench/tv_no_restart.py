"""Does a running transactional producer move to KIP-890's protocol (TV2) after
``transaction.version`` is raised, without a restart? And what makes it move?

Kafka's documentation (operations, "Transaction Protocol") says producer clients 4.0+ "do not need
to be restarted, and will dynamically upgrade the next time they connect or re-connect to a
broker". This measures it against a real cluster, from the coordinator's own log:

1. a local cluster (``--nodes``, ``--kafka-version``) formatted at ``transaction.version=1``, with
   a topic of one partition per broker (each broker leads one);
2. one probe per client, each one transactional producer that is never recreated, committing a
   transaction (a record to every partition) every ``--interval-ms``: Java kafka-clients of each
   ``--java`` release (bench/tv_probe/KchaosTvProbe.java, compiled against it) and franz-go
   (bench/tv_probe/franzgo, built once against the module proxy's v1.22.3);
3. after ``--settle`` s, FeatureCommand upgrades transaction.version to 2; then ``--hold`` s with
   nothing else done;
4. then each ``--lever`` in turn, each followed by ``--after`` s:
   ``cut-clients`` (every client proxy disabled for 2 s and enabled again: the brokers are not
   touched, the clients' connections are closed and reopened), ``kill-restart`` (the broker
   coordinating the first probe's transactional id SIGKILLed, started again after 6 s),
   ``kill-coordinator`` (the same, but the broker stays down ``--down-s`` s, long enough for the
   coordinator to move), ``none``;
5. the probes are stopped, ``__transaction_state`` is read whole and decoded
   (kchaos/protocol/decoders.py), and every transaction the coordinator completed is put in the
   window it completed in, with the client transaction version the coordinator recorded
   (``ClientTransactionVersion``; verifier/coordinator_log.py segments the log).

Output: per probe, committed transactions by client TV before the flip, between the flip and the
first lever, and after each lever; when the first TV2 transaction completed; the probe's own view
(``txn_v2``, the finalized-features epoch it read, the connections it had opened) at its first TV2
transaction. The load average is printed beside each window. ``--out DIR`` keeps the probes'
lines, the decoded log and ``summary.json``; without it everything is removed. The cluster and
every probe are stopped on the way out (Ctrl-C too).

    .venv/bin/python bench/tv_no_restart.py [--nodes 1] [--kafka-version 4.2.1]
        [--java 4.0.0,4.1.2,4.2.1,4.3.1,4.4.0] [--no-franz-go] [--settle 20] [--hold 75]
        [--lever cut-clients] [--lever kill-restart] [--after 40] [--interval-ms 300] [--debug-network]
        [--out DIR]

About 3 minutes for one node and one lever (the cluster start, the probes' JVMs, 20 + 75 + 40 s).
docs/certification.md, "Does a producer switch without a restart?", has the figures.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kchaos.clusters import ClusterSpec  # noqa: E402
from kchaos.clusters.local import LocalJvmCluster  # noqa: E402
from kchaos.clusters.proxy.links import proxy_name_client  # noqa: E402
from kchaos.paths import cache_dir  # noqa: E402
from kchaos.protocol.decoders import decode_transaction_record  # noqa: E402
from kchaos.runtime.artifacts import require_java  # noqa: E402
from kchaos.runtime.java_build import compiled_classes  # noqa: E402
from kchaos.runtime.kafka_tools import describe_features, upgrade_feature  # noqa: E402
from kchaos.runtime.processes import ManagedProcess  # noqa: E402
from kchaos.verifier.coordinator_log import coordinator_transactions  # noqa: E402
from kchaos.workloads.dump import dump_topic  # noqa: E402
from kchaos.workloads.java_client import CTP_WORKER  # noqa: E402

PROBES = Path(__file__).resolve().parent / "tv_probe"
GO_SUM = Path(__file__).resolve().parents[1] / "workloads" / "clients" / "go" / "go.sum"
TOPIC = "tvprobe"
MARKER = "tvprobe"


def load() -> float:
    return round(os.getloadavg()[0], 2)


def java_probe(version: str) -> str:
    """The Java probe compiled against kafka-clients ``version`` (once, into the cache), as a classpath."""
    jars = CTP_WORKER.jars(version)
    classes = compiled_classes("KchaosTvProbe", [PROBES / "KchaosTvProbe.java"], jars.classpath, version,
                               f"the TV probe against kafka-clients {version}", "use a 4.0+ release")
    return f"{classes}:{jars.classpath}"


def franz_go_probe() -> Path:
    """The franz-go probe, built once into the cache with ``go build`` (the module proxy's v1.22.3)."""
    sources = [PROBES / "franzgo" / "main.go", PROBES / "franzgo" / "go.mod"]
    digest = hashlib.sha256(b"".join(s.read_bytes() for s in sources)).hexdigest()[:12]
    binary = cache_dir() / "clients" / f"tvprobe-franzgo-{digest}"
    if binary.exists():
        return binary
    go = shutil.which("go")
    if go is None:
        raise SystemExit("the franz-go probe needs Go (go build); or pass --no-franz-go")
    with tempfile.TemporaryDirectory(prefix="tvprobe-go-") as work:
        for s in sources:
            shutil.copy(s, work)
        shutil.copy(GO_SUM, Path(work) / "go.sum")
        binary.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "GOFLAGS": "-mod=mod"}
        subprocess.run([go, "build", "-o", str(binary), "."], cwd=work, env=env, check=True)
    return binary


def read_lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            pass  # a line cut by a kill
    return out


def coordinator_log(cluster: LocalJvmCluster, out: Path) -> list[dict[str, Any]]:
    """Every ``__transaction_state`` record, decoded, as coordinator_transactions reads them."""
    import pyarrow.parquet as pq

    dump_topic(cluster.client_config(), cluster.admin(), "__transaction_state", "raw", out)
    table = pq.read_table(next(out.glob("__transaction_state*.parquet"))).to_pylist()
    records = []
    for row in table:
        entry = decode_transaction_record(row["key"], row["value"])
        if entry is None:
            continue
        records.append({"partition": row["partition"], "offset": row["offset"],
                        "transactional_id": entry.transactional_id, "producer_id": entry.producer_id,
                        "producer_epoch": entry.producer_epoch, "status": entry.status,
                        "partitions": entry.partitions, "last_update_ms": entry.last_update_ms,
                        "start_ms": entry.start_ms, "timeout_ms": entry.timeout_ms,
                        "client_transaction_version": entry.client_transaction_version})
    return records


def kill_broker(cluster: LocalJvmCluster, node_id: int, down_s: float) -> None:
    node = next(n for n in cluster.nodes if n.node_id == node_id)
    node.kill()
    time.sleep(down_s)
    node.start()
    cluster.wait_healthy(180)


def cut_clients(cluster: LocalJvmCluster, seconds: float = 2.0) -> None:
    """Every client proxy off for ``seconds`` (Toxiproxy closes the connections through it), then on."""
    proxy = cluster.toxiproxy
    assert proxy is not None
    names = [proxy_name_client(n.node_id) for n in cluster.brokers]
    for name in names:
        proxy.set_enabled(name, False)
    time.sleep(seconds)
    for name in names:
        proxy.set_enabled(name, True)


def windows_of(marks: list[tuple[str, float]], ms: int) -> str:
    """The name of the window a completion time (ms) falls in: the last mark before it."""
    name = "before flip"
    for mark, at in marks:
        if ms / 1000 >= at:
            name = mark
    return name


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=1)
    ap.add_argument("--kafka-version", default="4.2.1")
    ap.add_argument("--java", default="4.0.0,4.1.2,4.2.1,4.3.1,4.4.0", help="kafka-clients releases, comma-separated")
    ap.add_argument("--no-franz-go", action="store_true")
    ap.add_argument("--settle", type=float, default=20.0)
    ap.add_argument("--hold", type=float, default=75.0)
    ap.add_argument("--lever", action="append", choices=["cut-clients", "kill-restart", "kill-coordinator", "none"])
    ap.add_argument("--after", type=float, default=40.0)
    ap.add_argument("--down-s", type=float, default=20.0, help="kill-coordinator: seconds the broker stays down")
    ap.add_argument("--interval-ms", type=int, default=300)
    ap.add_argument("--tag", default="", help="added to the transactional ids (repeats on one cluster)")
    ap.add_argument("--debug-network", action="store_true",
                    help="the Java probes log NetworkClient at DEBUG (each connection, and each ApiVersions answer "
                         "with its node and finalized-features epoch) into PROBE.log; keep it with --out")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    levers = args.lever or ["cut-clients"]
    versions = [v for v in args.java.split(",") if v]

    require_java()
    probes: dict[str, list[str]] = {}
    for v in versions:
        probes[f"java-{v}"] = [require_java(), "-Xmx64m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                               "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-Dorg.slf4j.simpleLogger.showDateTime=true",
                               "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
                               *(["-Dorg.slf4j.simpleLogger.log.org.apache.kafka.clients.NetworkClient=debug"]
                                 if args.debug_network else []),
                               "-cp", java_probe(v), "KchaosTvProbe"]
    if not args.no_franz_go:
        probes["franz-go-1.22.3"] = [str(franz_go_probe())]

    keep = args.out is not None
    out = (args.out or Path(tempfile.mkdtemp(prefix="kchaos-tv-no-restart-"))).resolve()
    out.mkdir(parents=True, exist_ok=True)
    spec = ClusterSpec(nodes=args.nodes, kafka_version=args.kafka_version, transaction_version=1,
                       internal_topic_partitions=max(1, args.nodes))
    cluster = LocalJvmCluster(spec, out / "cluster")
    marks: list[tuple[str, float]] = []
    loads: dict[str, float] = {}
    procs: dict[str, ManagedProcess] = {}
    stop_file = out / "stop"
    try:
        print(f"cluster: {args.nodes} node(s), Kafka {args.kafka_version}, transaction.version=1 (load {load()})", flush=True)
        cluster.start()
        from confluent_kafka.admin import NewTopic

        futures = cluster.admin().create_topics([NewTopic(TOPIC, args.nodes, min(3, args.nodes))])
        futures[TOPIC].result(30)
        cluster.partition_metadata(TOPIC)
        for name, argv in probes.items():
            txid = f"tvprobe-{name}{args.tag}"
            full = [*argv, cluster.bootstrap_servers, txid, TOPIC, str(args.nodes), str(args.interval_ms),
                    str(out / f"{name}.jsonl"), str(stop_file)]
            procs[name] = ManagedProcess(f"{MARKER}-{name}", full, out / f"{name}.log", cluster.pid_dir, MARKER)
            procs[name].start()
        started = time.time()
        while time.time() - started < 120:
            if all(any(r.get("event") == "txn" for r in read_lines(out / f"{n}.jsonl")) for n in procs):
                break
            time.sleep(1)
        coordinators = {n: cluster.transaction_coordinator(f"tvprobe-{n}{args.tag}") for n in procs}
        print(f"probes committing: {', '.join(procs)}; coordinators {coordinators} (load {load()})", flush=True)
        time.sleep(args.settle)
        loads["before flip"] = load()
        marks.append(("during flip", time.time()))
        upgrade_feature(cluster, "transaction.version", 2)
        features = describe_features(cluster)
        print(f"flipped: transaction.version={features.get('transaction.version')} (load {load()})", flush=True)
        marks.append(("after flip", time.time()))
        time.sleep(args.hold)
        loads["after flip"] = load()
        for i, lever in enumerate(levers):
            label = f"after {lever}" + (f" #{i + 1}" if levers.count(lever) > 1 else "")
            marks.append((label, time.time()))
            target = coordinators[next(iter(procs))]
            if lever == "cut-clients":
                cut_clients(cluster)
            elif lever == "kill-restart":
                kill_broker(cluster, target, 6.0)
            elif lever == "kill-coordinator":
                kill_broker(cluster, target, args.down_s)
            print(f"{lever} done{'' if lever in ('cut-clients', 'none') else f' (node {target})'} "
                  f"(load {load()})", flush=True)
            time.sleep(args.after)
            loads[label] = load()
        stop_file.write_text("stop\n")
        for proc in procs.values():
            deadline = time.time() + 30
            while proc.is_running() and time.time() < deadline:
                time.sleep(0.2)
            if proc.is_running():
                proc.kill()
        marks.append(("stopped", time.time()))
        records = coordinator_log(cluster, out / "topics")
    finally:
        for proc in procs.values():
            proc.kill()
        cluster.stop()
    (out / "transaction_state.json").write_text(json.dumps(records))
    summary = summarize(records, procs, out, marks, loads, args, coordinators)
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    print_summary(summary)
    if not keep:
        shutil.rmtree(out, ignore_errors=True)
    else:
        shutil.rmtree(out / "cluster", ignore_errors=True)  # the brokers' data: the decoded log is kept
        print(f"kept: {out}")
    return 0


def summarize(records: list[dict[str, Any]], procs: dict[str, Any], out: Path, marks: list[tuple[str, float]],
              loads: dict[str, float], args: argparse.Namespace, coordinators: dict[str, int]) -> dict[str, Any]:
    txns = coordinator_transactions(records)
    windowed = [(m, at) for m, at in marks if m != "stopped"]
    names = [m for m, _ in windowed]
    rows = {}
    for name in procs:
        txid = f"tvprobe-{name}{args.tag}"
        mine = [t for t in txns if t.transactional_id == txid and t.completed == "commit" and t.complete_ms]
        counts: dict[str, Counter] = {w: Counter() for w in ["before flip", *names]}
        first_tv2 = None
        for t in sorted(mine, key=lambda t: t.complete_ms or 0):
            window = windows_of(windowed, t.complete_ms or 0)
            counts.setdefault(window, Counter())[f"tv{t.client_tv}"] += 1
            if t.client_tv >= 2 and first_tv2 is None:
                first_tv2 = t
        lines = read_lines(out / f"{name}.jsonl")
        client_first_v2 = next((r for r in lines if r.get("event") == "txn" and r.get("txn_v2") is True), None)
        inits = [r for r in lines if r.get("event") == "init"]
        fatal = [r for r in lines if r.get("event") == "fatal"]
        switched_in = windows_of(windowed, first_tv2.complete_ms) if first_tv2 else None
        opened: dict[str, list[int]] = {}
        known: dict[str, list[int]] = {}
        for r in lines:
            if r.get("event") != "txn":
                continue
            window = windows_of(windowed, int(r["time"] * 1000))
            if isinstance(r.get("connections"), int):
                opened.setdefault(window, []).append(r["connections"])
            if isinstance(r.get("features_epoch_known"), int):
                known.setdefault(window, []).append(r["features_epoch_known"])
        rows[name] = {
            "transactional_id": txid, "coordinator": coordinators.get(name),
            "commits_by_window": {w: dict(c) for w, c in counts.items()},
            "first_tv2_commit_s_after_flip": round((first_tv2.complete_ms or 0) / 1000 - marks[0][1], 1)
            if first_tv2 else None,
            "first_tv2_window": switched_in,
            "producer_instances": len(inits), "fatal": fatal[:1],
            "client_view_at_first_v2": client_first_v2,
            "client_aborts": sum(1 for r in lines if r.get("outcome") == "abort"),
            "connections_opened_by_window": {w: [min(c), max(c)] for w, c in opened.items()},
            # Java only: the newest finalized-features epoch its ApiVersions holds (an ApiVersions
            # answer on a new connection is the only thing that raises it)
            "features_epoch_known_by_window": {w: [min(c), max(c)] for w, c in known.items()},
        }
    return {"nodes": args.nodes, "kafka_version": args.kafka_version, "levers": args.lever or ["cut-clients"],
            "hold_s": args.hold, "after_s": args.after, "interval_ms": args.interval_ms,
            "marks": {m: round(at - marks[0][1], 1) for m, at in marks}, "load": loads, "probes": rows}


def print_summary(s: dict[str, Any]) -> None:
    print(f"\nwindows (s after the flip): {s['marks']}; load average at each window's end: {s['load']}")
    for name, row in s["probes"].items():
        windows = "; ".join(f"{w}: {' '.join(f'{k}={v}' for k, v in sorted(c.items())) or '-'}"
                            for w, c in row["commits_by_window"].items())
        first = (f"first TV2 commit {row['first_tv2_commit_s_after_flip']} s after the flip ({row['first_tv2_window']})"
                 if row["first_tv2_window"] else "never TV2")
        view = row["client_view_at_first_v2"] or {}
        print(f"{name:16} {first}; instances {row['producer_instances']}, aborts {row['client_aborts']}"
              f"{', FATAL' if row['fatal'] else ''}\n    {windows}"
              f"\n    connections opened so far (min-max per window): "
              + "; ".join(f"{w}: {a}-{b}" for w, (a, b) in row["connections_opened_by_window"].items())
              + ("\n    finalized-features epoch its ApiVersions holds (min-max per window): "
                 + "; ".join(f"{w}: {a}-{b}" for w, (a, b) in row["features_epoch_known_by_window"].items())
                 if row["features_epoch_known_by_window"] else "")
              + (f"\n    client at its first txn_v2: connections {view.get('connections')}, features epoch read "
                 f"{view.get('features_epoch_read')}, known {view.get('features_epoch_known')}" if view else ""))


if __name__ == "__main__":
    sys.exit(main())
