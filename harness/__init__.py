"""kchaos harness: ``kchaos run`` and its kin: loading a campaign file (campaign.py), the phases of
one run (run.py), runs one after another (runs.py: ``--count``, the nightly's step), live
progress, pruning. It may import every layer below it; only ci/ and cli/ import it."""
