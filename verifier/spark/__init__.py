"""The Spark engine: the PySpark job that checks a run at scale. Its ingest of the topics through
Spark's Kafka source (ingest.py), its run object (run.py), its queries of each check (checks.py,
observations.py: the read-side ones), its environment (env.py) and its entry point (job.py). What
each check means is not here but in verifier/checks.py, shared with the single-process reference."""
