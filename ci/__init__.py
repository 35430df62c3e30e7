"""Nightly CI: ``kchaos ci nightly`` runs a campaign matrix (fixed and fresh seeds, release x
transaction.version variants, negative controls) and writes JUnit XML, the release table and the
index (nightly.py, release_table.py)."""
