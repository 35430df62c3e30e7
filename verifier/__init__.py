"""The verifier: a run directory in, a verdict out. Two engines of one interface (engine): the
PySpark job (spark/: ingest, loading, queries) and the single-process reference (pychecker); the
one definition of each check and of what a workload claims (checks, model, coordinator_log,
offsets_log, acknowledged, evidence; the internal topics' decoders are kchaos.protocol's); the
run directory read into memory for the reference engine and the share ledger (run_data); the
typed campaign a run records (campaign); the certification (certify); the verdict's one writer
(verdict, over verify) and the typed outcome every reader gets (outcome)."""
