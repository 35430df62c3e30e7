"""Where the Spark ingest stops reading: the final reads' recorded ends, so both engines judge one
snapshot of topics that keep growing (hand-made final.json data)."""

from __future__ import annotations

import json

from kchaos.verifier.spark.ingest import recorded_ends


def _final(*topics):
    return {"topics": [{"topic": t, "view": v, "end_offsets": ends} for t, v, ends in topics]}


def test_each_partition_ends_where_the_final_reads_ended_it_in_that_view():
    final = _final(("out", "committed", {"0": 10, "1": 7}), ("out", "raw", {"0": 12, "1": 9}),
                   ("__consumer_offsets", "committed", {"0": 322, "1": 463, "2": 267}))
    ends = json.loads(recorded_ends(final, "committed", {"out": [0, 1], "__consumer_offsets": [0, 1, 2]}))
    assert ends == {"out": {"0": 10, "1": 7}, "__consumer_offsets": {"0": 322, "1": 463, "2": 267}}
    assert json.loads(recorded_ends(final, "raw", {"out": [0, 1]})) == {"out": {"0": 12, "1": 9}}


def test_a_partition_the_final_reads_did_not_end_is_read_to_its_latest_offset():
    final = _final(("out", "committed", {"0": 10}))  # partition 1 never reached its end
    assert json.loads(recorded_ends(final, "committed", {"out": [0, 1], "in": [0]})) == \
        {"out": {"0": 10, "1": -1}, "in": {"0": -1}}


def test_without_recorded_ends_the_ingest_reads_to_the_latest_offsets():
    assert recorded_ends(None, "committed", {"out": [0]}) == "latest"
    assert recorded_ends(_final(("out", "raw", {"0": 3})), "committed", {"out": [0]}) == "latest"
