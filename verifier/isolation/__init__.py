"""Isolation anomalies of transactions that both poll and send shared partitions (issue 77, item
2): Elle's dependency graph over a Kafka transactional history, its cycles named as Elle names them
(G0, G1c, G-single, G2, with -process and -realtime), the direct checks G1a and G1b, and each name
judged against what Kafka documents (cycles.py). The version order is read exactly from the final
raw log, which Jepsen has to infer. The workload that produces such histories is ``workload.kind =
"txn"`` (workloads/txn_worker.py), and history.py reads its run directory into this checker's
inputs; this is the reference the other engine must agree with. The Spark engine's query is
verifier/spark/isolation.py: it computes the same graph, direct cases and gaps in Spark and is judged
here (cycles.judge, judge.isolation_result), so classes and verdicts have one definition;
judge.isolation_disagreements compares the two engines' results."""
