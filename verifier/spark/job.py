"""The verifier: a PySpark job that proves (or refutes) exactly-once for one run directory.

    python -m kchaos.verifier.spark.job RUN_DIR [--master local[2] | spark://host:port]
                                         [--bootstrap HOST:PORT] [--data-dir URL] [--out FILE]

Inputs
  * every topic the checks read, through **Spark's Kafka source** when ``--bootstrap`` names a
    live cluster: the input and output topics in both views (read_committed and
    read_uncommitted), ``__transaction_state`` (raw) and ``__consumer_offsets`` (committed: an
    aborted transactional offset commit is not one), each topic's partitions assigned
    explicitly (the source does not subscribe to internal topics). One query per view writes
    Parquet partitioned by topic under the **data directory**: ``--data-dir`` (any
    Hadoop-compatible URL the executors reach: ``hdfs://``, ``s3a://``, a shared ``file:``
    mount; the run's name is appended) or ``RUN_DIR/topics-spark``. ``RUN_DIR/topics-spark/
    ingest.json`` records where, so ``analyze`` re-checks without a cluster. Without an ingest
    the client dumps in ``RUN_DIR/topics/`` are read (then the executors must see that path);
  * the internal topics are decoded by the executors (``mapInArrow`` over the project's
    decoders, kchaos/protocol/decoders.py): no single-process step grows with the cluster;
  * the client history (paired operations), the group's final offsets and the broker-side
    state after heal (``final.json``), read by the driver and handed to Spark as DataFrames.

Each check is a Spark query; the evidence of at most ``MAX_CASES`` cases per anomaly is
collected to the driver and completed from the history (transactional.id, producer id and epoch,
history operation, faults active then). The anomaly names and evidence match the single-process
checker (verifier/pychecker.py), which ``kchaos run`` runs beside it as a cross-check.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path

from kchaos.clusters.client_security import recorded as recorded_client_security
from kchaos.clusters.client_security import resolve_env_refs
from kchaos.files import atomic_write
from kchaos.verifier.campaign import load_recorded
from kchaos.verifier.results import Results
from kchaos.verifier.spark.checks import check_run_spark
from kchaos.verifier.spark.ingest import SPARK_DIR, VIEWS, TopicSource, ingest_topics, topic_partitions
from kchaos.verifier.spark.env import class_archive, finish_class_archive, remove_stale_dumps, spark_session


def output_records(run: Path, bootstrap: str | None, client: dict[str, str] | None = None) -> int | None:
    """About how many output records the job will read (both views), before its session starts:
    the topics' end offsets when reading a live cluster, else the ingest's counts or the client
    dumps' Parquet footers. It sizes the driver JVM (spark.env.QUICK_JIT_BELOW); None if unknown."""
    try:
        output_topics = load_recorded(run).workload.output_topics
        if bootstrap:
            from confluent_kafka import Consumer, TopicPartition

            consumer = Consumer({**resolve_env_refs(client or {}), "bootstrap.servers": bootstrap,
                                 "group.id": "kchaos-verifier-size", "log_level": 3})
            try:
                ends = 0
                for topic, parts in topic_partitions(bootstrap, output_topics, client).items():
                    for p in parts:
                        ends += consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                return 2 * ends  # both views; markers counted too, an upper bound
            finally:
                consumer.close()
        source = TopicSource(run, prefer_ingest=False)
        if source.name == "spark-kafka-source":
            return sum(source.ingest["topics"].get(f"{t}.{v}", {}).get("records", 0) for t in output_topics for v in VIEWS)
        import pyarrow.parquet as pq

        return sum(pq.ParquetFile(f"{source.location}/{t}.{v}.parquet").metadata.num_rows
                   for t in output_topics for v in VIEWS if source.has(t, v))
    except Exception:
        return None  # sizing is an optimisation: the job itself reports what is missing


#: the line a job started ahead prints when its session is up and it waits for its run
SESSION_UP = "kchaos: the Spark session is up"
#: how long a job started ahead waits for its run at most (the drain's and final reads' bounds are
#: far shorter; past it, the harness that started it is taken as gone)
WAIT_FOR_RUN_S = 3600.0


def released(go: Path, timeout_s: float = WAIT_FOR_RUN_S) -> bool:
    """Wait for the harness's word in ``go`` (verifier/verify.py ``SparkJob``): True to go on;
    False when it says stand down, when the harness that started this job is gone (this process's
    parent changed) or after ``timeout_s``."""
    parent, deadline = os.getppid(), time.monotonic() + timeout_s
    while time.monotonic() < deadline and os.getppid() == parent:
        if go.exists():
            try:
                return bool(json.loads(go.read_text()).get("go"))
            except (OSError, ValueError):
                pass  # written atomically; a read that failed is asked again
        time.sleep(0.2)
    return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kchaos.verifier.spark.job", description=__doc__.split("\n")[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--master", default=None, help="Spark master (default local[2] or $KCHAOS_SPARK_MASTER)")
    parser.add_argument("--bootstrap", default=None, help="read the topics from this live cluster first")
    parser.add_argument("--data-dir", default=None,
                        help="where the ingest writes (a Hadoop-compatible URL the executors reach; the run's name "
                             "is appended); default RUN/topics-spark")
    parser.add_argument("--out", type=Path, default=None, help="write the results here (default RUN/results.spark.json)")
    parser.add_argument("--wait-for", type=Path, default=None,
                        help="start the session, then wait for this file: {\"go\": true} to check the run, "
                             "{\"go\": false} (or the parent's exit) to stop without results")
    args = parser.parse_args(argv)

    out = args.out or args.run / "results.spark.json"
    started = time.monotonic()
    results = Results(checker="spark")
    timings: dict[str, float] = {}
    spark = None
    dump_to = None
    client = recorded_client_security(args.run)
    try:
        # no archive yet: this JVM writes one when it exits, for every later job on this machine
        archive = class_archive()
        if archive is not None and not archive.exists():
            dump_to = archive.with_name(f"{archive.name}.{os.getpid()}.tmp")
            remove_stale_dumps(archive.parent)
        # the run directory on the driver JVM's command line: leak checks and reapers can find it
        spark = spark_session(args.master, extra_conf={"spark.kchaos.run": str(args.run.resolve())},
                              ship_code_from=args.run / SPARK_DIR, dump_archive_to=dump_to,
                              records=output_records(args.run, args.bootstrap, client))
        timings["session_s"] = round(time.monotonic() - started, 2)
        if args.wait_for is not None:
            t = time.monotonic()
            print(f"{SESSION_UP} ({timings['session_s']}s); waiting for {args.wait_for}", flush=True)
            if not released(args.wait_for):
                return 0  # stood down: nothing was checked, so nothing is written
            timings["waited_for_the_run_s"] = round(time.monotonic() - t, 2)
        if args.bootstrap:
            workload = load_recorded(args.run).workload
            t = time.monotonic()
            ingest_topics(spark, args.bootstrap, args.run, [workload.input_topic, *workload.output_topics],
                          args.data_dir, client)
            timings["ingest_s"] = round(time.monotonic() - t, 2)
        t = time.monotonic()
        results = check_run_spark(spark, args.run, prefer_ingest=bool(args.bootstrap))
        timings["checks_s"] = round(time.monotonic() - t, 2)  # loading included
        timings.update((results.spark or {}).get("timings", {}))
    except Exception as exc:
        results.errors.append(f"the Spark job failed: {exc!r}")
        print(traceback.format_exc(), file=sys.stderr)
    finally:
        if spark is not None:
            spark.stop()
    results.spark = {"master": args.master or "default", "timings": timings}
    data = results.to_json()
    atomic_write(out, json.dumps(data, indent=2, default=str))
    print(json.dumps({"verdict": data["verdict"], "anomaly_types": data["anomaly_types"], "timings": timings}), flush=True)
    if dump_to is not None and spark is not None:  # after the results: a failed dump costs nothing but time
        # an archive holds the classes its job loaded: one from a job that stopped early would
        # leave every later job half the benefit, so only a complete job's is kept
        finish_class_archive(dump_to, keep=not results.errors)
    return 0


if __name__ == "__main__":
    sys.exit(main())

