"""Nightly CI: ``kchaos ci nightly`` runs a campaign matrix (fixed and fresh seeds, release x
transaction.version variants, negative controls) and writes JUnit XML, the release table and the
index (nightly.py, release_table.py); ``--shard I/N`` runs one of N balanced shards of a night
(shards.py) and ``kchaos ci merge`` joins them into one night (merge.py)."""
