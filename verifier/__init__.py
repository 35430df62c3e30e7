"""The verifier: the PySpark job (spark_job), the single-process reference (pychecker), the one
definition of each check (checks, model), and the verdict and its one writer (verify)."""
