"""The PySpark verifier (issue: verifier). Not implemented yet."""
