"""Committed transactions per second on this machine: the ceiling behind a certification
campaign's volume.

Seeds a backlog, then runs the exactly-once pipeline with ``max_batch`` inputs per transaction
(default 1: one transaction per input, the most transactions the pipeline can make) for W
workers of a client, faultless, and counts the transactions the workers' own histories record
as committed, divided by the time from the first worker start until every input is processed.
It also prints the harness's load average, so a figure is read next to how busy the 2 cores were.

With ``--copier`` a second reference: Kafka's own consume-transform-produce test app,
``TransactionalMessageCopier`` (kafka-tools; the app Kafka's ``transactions_test`` runs), W
instances in one group, ``--transaction-size`` = ``--batch``, offsets in the transaction, on an
input seeded like the pipeline's. It writes one output per input to one topic (the pipeline: two,
to two topics), so it is the nearest shape Kafka ships; its row's ratio is pipeline / copier.

The reference, on the same cluster in the same run: Kafka's own transactional producer
(``kafka-producer-perf-test``, ``org.apache.kafka.tools.ProducerPerformance`` from the kafka-tools
jar) with ``--transactional-id`` and ``--transaction-duration-ms 1`` (a commit as soon as 1 ms
has passed since the transaction began: as many transactions as the tool makes), W instances at
once for W workers, each on a one-partition topic of its own. Its committed transactions are
counted exactly from the topic: high watermark minus records = commit markers. The pipeline does
more per transaction (consume, two outputs, offsets in the transaction), so the ratio says how
much of the cluster's transaction capacity the harness itself leaves unused.

With ``--message-proxy`` the cluster has the message proxy on its client path
(clusters/proxy/server.py) and each pipeline measurement is made twice on it, with no fault
active: through the message proxy, then with the Toxiproxy client proxies pointed straight at
the brokers (the message proxy bypassed). The ratio is the proxy's cost. With
``--message-proxy-between-brokers`` the same is done on the links between brokers (replication
and transaction markers: the ``repl-n<i>-to-n<k>`` link proxies pointed at the message proxy, then
straight at the brokers' replication listeners); the client path keeps the message proxy in both.

    .venv/bin/python bench/transaction_rate.py [--workers 2 --workers 4 --workers 8]
        [--client confluent|java|mixed] [--records 3000] [--batch 1] [--nodes 3]
        [--transaction-version 2] [--perf-records 20000] [--no-reference] [--copier] [--message-proxy]
        [--message-proxy-between-brokers] [--observers 1]

With ``--observers N`` each pipeline measurement is made again with N observers reading every
user topic from the start (a run's ``[observers]``): the ratio is what they cost.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kchaos.clusters import ClusterSpec  # noqa: E402
from kchaos.clusters.local import LocalJvmCluster  # noqa: E402
from kchaos.rundir import RunDir  # noqa: E402
from kchaos.workloads.history import HistoryWriter, read_lines  # noqa: E402
from kchaos.workloads.spec import ObserverSpec, WorkloadSpec  # noqa: E402


def committed_transactions(history_dir: Path) -> int:
    """Commits the workers recorded as ok (not the seeder's, not the harness's)."""
    count = 0
    for path in history_dir.glob("w*.jsonl"):
        count += sum(1 for r in read_lines(path) if r["f"] == "commit" and r["type"] == "ok")
    return count


def measure(cluster, root: Path, client: str, workers: int, records: int, batch: int,
            producer: dict[str, str] | None = None, observers: int = 0) -> dict[str, float]:
    from kchaos.workloads import make_workload
    from kchaos.workloads.observer import Observers
    from kchaos.workloads.pool import WorkerPool
    from kchaos.workloads.seeder import Seeder

    tag = uuid.uuid4().hex[:6]
    spec = WorkloadSpec(input_topic=f"in-{tag}", output_topics=(f"a-{tag}", f"b-{tag}"), group_id=f"g-{tag}",
                        client=client, records=records, rate=1e9, workers=workers, max_batch=batch,
                        input_partitions=max(workers, 2), abort_fraction=0.0, drain_timeout_s=1800,
                        producer=producer or {})
    run = RunDir.create(root, f"txn-{client}-{workers}", 1)
    history = HistoryWriter(run.path / "history" / "harness.jsonl", "harness")
    workload = make_workload(spec, cluster, run, 1, history)
    workload.setup()
    seeder = Seeder(workload.client, spec.input_topic, records, 1e9, 1, run.path / "history" / "seeder.jsonl",
                    f"bench-{tag}-seeder", abort_fraction=0.0)
    seeder.start()
    seeder.wait(600)
    workload.seeder = seeder
    workload.pool = WorkerPool(spec, workload.client, run.path, 1, workload.txid_prefix, history)
    readers = None
    if observers:  # reading every user topic from the start, as a run's observers do
        topics = {spec.input_topic: spec.input_partitions, **{t: spec.output_partitions for t in spec.output_topics}}
        readers = Observers(ObserverSpec(count=observers), workload.client, topics, run.path / "observers")
        readers.start()
    load_before = os.getloadavg()[0]
    started = time.monotonic()
    workload.pool.start()
    ok = workload.drain(1800)
    elapsed = time.monotonic() - started
    load_after = os.getloadavg()[0]
    workload.pool.stop()
    if readers is not None:
        readers.stop()
    history.close()
    if not ok:
        raise SystemExit(f"{client} x{workers}: drain did not finish")
    commits = committed_transactions(run.path / "history")
    return {"elapsed_s": elapsed, "commits": commits, "txn_per_s": commits / elapsed,
            "inputs_per_s": records / elapsed, "load": max(load_before, load_after)}


def measure_perf_tool(cluster, instances: int, records: int) -> dict[str, float]:
    """W concurrent kafka-producer-perf-test processes, transactional; committed transactions/s."""
    import re
    import subprocess

    from confluent_kafka import Consumer, TopicPartition

    from kchaos.runtime.artifacts import require_java, resolve_kafka
    from kchaos.clusters.clients import create_topic
    from kchaos.runtime.kafka_tools import tool_main_class

    tag = uuid.uuid4().hex[:6]
    topics = [f"perf-{tag}-{i}" for i in range(instances)]
    for topic in topics:
        create_topic(cluster, topic, 1, min(3, len(cluster.brokers)))
    jars = resolve_kafka(cluster.kafka_version)
    load_before = os.getloadavg()[0]
    procs = [subprocess.Popen(
        [require_java(), "-Xmx256m", "-cp", jars.classpath, tool_main_class("producer-perf", cluster.kafka_version),
         "--topic", topic, "--num-records", str(records), "--record-size", "100", "--throughput", "-1",
         "--transactional-id", f"{topic}-tx", "--transaction-duration-ms", "1",
         "--producer-props", f"bootstrap.servers={cluster.bootstrap_servers}", "acks=all", "linger.ms=5"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for topic in topics]
    outputs = [p.communicate(timeout=1800)[0] for p in procs]
    load_after = os.getloadavg()[0]
    elapsed = []
    for out in outputs:
        # the summary line: "N records sent, R records/sec (...)": the tool's own elapsed time
        match = re.search(r"^(\d+) records sent, ([\d.]+) records/sec", out, re.M)
        if not match:
            raise SystemExit(f"kafka-producer-perf-test printed no summary:\n{out[-2000:]}")
        elapsed.append(int(match.group(1)) / float(match.group(2)))
    consumer = Consumer({**cluster.client_config(), "group.id": f"perf-{tag}", "log_level": 3})
    transactions = 0
    for topic in topics:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
        transactions += high - records  # one commit marker per transaction on a one-partition topic
    consumer.close()
    return {"elapsed_s": max(elapsed), "commits": transactions, "txn_per_s": transactions / max(elapsed),
            "load": max(load_before, load_after)}


def measure_copier(cluster, root: Path, instances: int, records: int, batch: int) -> dict[str, float]:
    """W concurrent TransactionalMessageCopier processes (Kafka's own consume-transform-produce
    test app, kafka-tools) in one group on a W-partition input seeded like the pipeline's, each
    transaction ``batch`` records with the offsets in it; committed transactions/s from start until
    the group's committed offsets cover every input."""
    import subprocess

    from confluent_kafka import Consumer, TopicPartition

    from kchaos.runtime.artifacts import require_java, resolve_kafka
    from kchaos.clusters.clients import create_topic
    from kchaos.workloads.seeder import Seeder

    tag = uuid.uuid4().hex[:6]
    partitions = max(instances, 2)
    source, sink, group = f"cin-{tag}", f"cout-{tag}", f"cg-{tag}"
    replication = min(3, len(cluster.brokers))
    create_topic(cluster, source, partitions, replication)
    create_topic(cluster, sink, partitions, replication)  # the copier keeps the input's partition number
    seeder = Seeder(cluster.client_config(), source, records, 1e9, 1, root / f"copier-{tag}-seeder.jsonl",
                    f"bench-{tag}-seeder", abort_fraction=0.0)
    seeder.start()
    seeder.wait(600)
    seeder.stop()
    ends = {p: o + 1 for p, o in seeder.last_committed_offset.items()}
    jars = resolve_kafka(cluster.kafka_version)
    load_before = os.getloadavg()[0]
    started = time.monotonic()
    procs = [subprocess.Popen(
        [require_java(), "-Xms32m", "-Xmx128m", "-XX:+UseSerialGC", "-cp", jars.classpath,
         "org.apache.kafka.tools.TransactionalMessageCopier", "--broker-list", cluster.bootstrap_servers,
         "--transactional-id", f"{group}-{i}", "--consumer-group", group, "--input-topic", source,
         "--input-partition", "0", "--output-topic", sink, "--transaction-size", str(batch),
         "--group-mode", "--use-group-metadata"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for i in range(instances)]
    consumer = Consumer({**cluster.client_config(), "group.id": group, "log_level": 3})
    try:
        while time.monotonic() - started < 1800:
            committed = consumer.committed([TopicPartition(source, p) for p in ends], timeout=30)
            if all(tp.offset >= ends[tp.partition] for tp in committed):
                break
            time.sleep(0.2)
        else:
            raise SystemExit("the copiers did not finish in 30 minutes")
        elapsed = time.monotonic() - started
        load_after = os.getloadavg()[0]
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    # each transaction writes one commit marker per output partition it touched: one, once every
    # copier owns a single partition (a few early transactions may touch two: a slight overcount)
    transactions = sum(consumer.get_watermark_offsets(TopicPartition(sink, p), timeout=30)[1] for p in ends) - records
    consumer.close()
    return {"elapsed_s": elapsed, "commits": transactions, "txn_per_s": transactions / elapsed,
            "load": max(load_before, load_after), "what": "copier"}


def bypass_message_proxy(cluster, bypass: bool) -> None:
    """Point every client proxy straight at its broker (or back at the message proxy)."""
    from kchaos.clusters.proxy.links import proxy_name_client
    from kchaos.runtime.ports import HOST

    ports = cluster.ports
    for broker in ports.proxy_client:
        port = ports.client[broker] if bypass else ports.client_upstream(broker)
        cluster.toxiproxy.set_upstream(proxy_name_client(broker), f"{HOST}:{port}")


def bypass_message_proxy_between_brokers(cluster, bypass: bool) -> None:
    """Point every replication link proxy straight at its broker (or back at the message proxy)."""
    from kchaos.clusters.proxy.links import proxy_name_repl
    from kchaos.runtime.ports import HOST

    ports = cluster.ports
    for pair in ports.proxy_repl:
        src, dst = (int(x) for x in pair.split(">"))
        port = ports.repl[pair] if bypass else ports.repl_upstream(pair)
        cluster.toxiproxy.set_upstream(proxy_name_repl(src, dst), f"{HOST}:{port}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, action="append")
    parser.add_argument("--client", choices=("confluent", "java", "mixed"), default="confluent")
    parser.add_argument("--records", type=int, default=3000)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--transaction-version", type=int, default=None)
    parser.add_argument("--perf-records", type=int, default=20000, help="records per perf-tool instance")
    parser.add_argument("--no-reference", action="store_true", help="skip kafka-producer-perf-test")
    parser.add_argument("--copier", action="store_true",
                        help="also run Kafka's TransactionalMessageCopier (consume-transform-produce) as a reference")
    parser.add_argument("--message-proxy", action="store_true",
                        help="measure the pipeline through the message proxy and with it bypassed")
    parser.add_argument("--message-proxy-between-brokers", action="store_true",
                        help="measure the pipeline with the message proxy on the links between brokers and bypassed there")
    parser.add_argument("--observers", type=int, default=0,
                        help="measure the pipeline without and with this many observers (workloads/observer.py)")
    parser.add_argument("--producer", action="append", default=[], metavar="NAME=VALUE",
                        help="a worker producer property, as [workload.producer] (e.g. retry.backoff.ms=2)")
    args = parser.parse_args()
    between = args.message_proxy_between_brokers
    spec: dict = {"nodes": args.nodes, "proxy_messages": args.message_proxy or between,
                  "proxy_messages_between_brokers": between}
    if args.transaction_version is not None:
        spec["transaction_version"] = args.transaction_version
    rows = []
    with tempfile.TemporaryDirectory(prefix="kchaos-bench-") as tmp:
        cluster = LocalJvmCluster(ClusterSpec.load(spec), Path(tmp) / "cluster")
        cluster.start()
        try:
            for workers in args.workers or [2, 4, 8]:
                producer = dict(p.split("=", 1) for p in args.producer)
                pipeline = measure(cluster, Path(tmp), args.client, workers, args.records, args.batch, producer)
                if args.observers:
                    watched = measure(cluster, Path(tmp), args.client, workers, args.records, args.batch, producer,
                                      observers=args.observers)
                    rows.append((workers, pipeline, {**watched, "what": f"{args.observers} observers"}))
                    continue
                if between:
                    bypass_message_proxy_between_brokers(cluster, True)
                    direct = measure(cluster, Path(tmp), args.client, workers, args.records, args.batch, producer)
                    bypass_message_proxy_between_brokers(cluster, False)
                    rows.append((workers, pipeline, {**direct, "what": "bypassed"}))
                    continue
                if args.message_proxy:
                    bypass_message_proxy(cluster, True)
                    direct = measure(cluster, Path(tmp), args.client, workers, args.records, args.batch, producer)
                    bypass_message_proxy(cluster, False)
                    rows.append((workers, pipeline, {**direct, "what": "bypassed"}))
                    continue
                reference = None if args.no_reference else measure_perf_tool(cluster, workers, args.perf_records)
                rows.append((workers, pipeline, reference))
                if args.copier:
                    rows.append((workers, pipeline, measure_copier(cluster, Path(tmp), workers, args.records,
                                                                   args.batch)))
        finally:
            cluster.stop()
    print(f"client={args.client} records={args.records} max_batch={args.batch} nodes={args.nodes} "
          f"cpus={os.cpu_count()} perf-tool records/instance={args.perf_records} producer={args.producer}")
    print(f"{'workers':>7} {'what':>10} {'commits':>8} {'seconds':>8} {'txn/s':>7} {'load':>5} "
          f"{'pipeline / this':>15}")
    shown: set[int] = set()
    for workers, m, ref in rows:
        if id(m) not in shown:  # a pipeline measurement may have two references (--copier)
            shown.add(id(m))
            what = "via proxy" if args.message_proxy or between else "pipeline"
            print(f"{workers:>7} {what:>10} {m['commits']:>8} {m['elapsed_s']:>8.1f} {m['txn_per_s']:>7.1f} "
                  f"{m['load']:>5.1f}")
        if ref:
            print(f"{workers:>7} {ref.get('what', 'perf-tool'):>10} {ref['commits']:>8} {ref['elapsed_s']:>8.1f} "
                  f"{ref['txn_per_s']:>7.1f} {ref['load']:>5.1f} {m['txn_per_s'] / ref['txn_per_s']:>15.2f}")


if __name__ == "__main__":
    main()
