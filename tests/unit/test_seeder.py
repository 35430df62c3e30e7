"""The seeder's transaction outcomes, on a hand-made producer (no broker)."""

from __future__ import annotations

import json

from confluent_kafka import KafkaError, KafkaException

from kchaos.workloads import seeder as seeder_module


class FlakyProducer:
    """The first producer's commit needs an abort and its abort is answered fatally (as a
    coordinator that holds the transaction in another state answers INVALID_TXN_STATE); the
    producers after it work."""

    made = 0

    def __init__(self, config):
        FlakyProducer.made += 1
        self.first = FlakyProducer.made == 1
        self.offset = 0

    def init_transactions(self, timeout):
        pass

    def begin_transaction(self):
        pass

    def produce(self, topic, key, value, on_delivery):
        self.offset += 1
        on_delivery(None, type("Msg", (), {"key": lambda s: key, "partition": lambda s: 0,
                                           "offset": lambda s, o=self.offset: o})())

    def commit_transaction(self, timeout):
        if self.first:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "commit timed out", txn_requires_abort=True))

    def abort_transaction(self, timeout):
        raise KafkaException(KafkaError(KafkaError.INVALID_TXN_STATE, "Failed to end transaction", fatal=True))

    def flush(self, timeout=None):
        return 0


def test_a_fatal_answer_to_the_abort_makes_the_outcome_unknown_and_a_fresh_producer_goes_on(tmp_path, monkeypatch):
    monkeypatch.setattr(seeder_module, "Producer", FlakyProducer)
    FlakyProducer.made = 0
    seeder = seeder_module.Seeder({}, "in", 50, 10_000.0, 1, tmp_path / "seeder.jsonl", "tx-seeder",
                                  abort_fraction=0.0)
    seeder.start()
    assert seeder.wait(30)
    seeder.stop()
    assert seeder.error is None and seeder.committed == 50 and FlakyProducer.made == 2
    events = [json.loads(line) for line in (tmp_path / "seeder.jsonl").read_text().splitlines()]
    seeds = [(e["type"], e.get("error", "")) for e in events if e["f"] == "seed" and e["type"] != "invoke"]
    # the first batch's outcome is unknown (the fresh producer's init fences it), then it is written again
    assert seeds[0][0] == "info" and "Failed to end transaction" in seeds[0][1]
    assert seeds[1][0] == "ok"
