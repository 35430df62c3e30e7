"""The verifier: a run directory in, a verdict out. The PySpark job (spark_job: ingest, loading,
queries) and the single-process reference (pychecker), two engines of one interface (engine);
the one definition of each check (checks, model, coordinator_log, offsets_log, acknowledged,
evidence); the typed campaign a run records (campaign); the certification (certify); and the
verdict's one writer (verdict, over verify)."""
