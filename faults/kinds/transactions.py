"""Faults that leave the brokers' transaction state as a broker bug would: ``orphan-transaction``
writes a transactional batch straight to a partition leader with no coordinator told (what a
Produce delayed past its transaction's end does in KIP-664 / KAFKA-9144), so the partition's
last stable offset stops there: a hanging transaction, on purpose. It shows that the
hanging-transaction check names one on a real broker and that the KIP-664 recovery
(``faults.recover_hanging``) gets the partition going again. A broker with partition
verification on (KIP-890 part 1, the default) refuses the batch; the fault records the
broker's answer either way. It is never healed: what it leaves is the point."""

from __future__ import annotations

from typing import Any

from kchaos.clusters.raw_produce import write_orphan_batch
from kchaos.errors import ClusterError
from kchaos.faults.base import Fault, resolve_node_target
from kchaos.faults.kinds import FaultKind, register

#: producer ids the orphans use: far above the blocks Kafka's controller hands out to coordinators
ORPHAN_PRODUCER_IDS = 1 << 48


class OrphanTransaction(Fault):
    def invoke(self) -> dict[str, Any]:
        target = resolve_node_target(self.ctx, self.scheduled.target, self.rng)
        topic, partition, leader = target["detail"]["topic"], target["detail"]["partition"], target["nodes"][0]
        broker = self.ctx.cluster.admin().list_topics(timeout=10).brokers.get(leader)
        if broker is None:
            raise ClusterError(f"broker {leader}, the leader of {topic}-{partition}, is not in the metadata")
        producer_id = ORPHAN_PRODUCER_IDS + self.rng.randrange(1 << 30)
        answer = write_orphan_batch(broker.host, broker.port, topic, partition, producer_id,
                                    f"kchaos-orphan-{producer_id}", [(b"kchaos-orphan", b"an orphan transaction")])
        self.target = {**target, "detail": {**target["detail"], "producer_id": producer_id, "producer_epoch": 0,
                                            "answer": answer["error"], "offset": answer["base_offset"]}}
        return self.target


register(
    FaultKind("orphan-transaction", "write a transactional batch no coordinator knows to a partition leader "
              "(a hanging transaction unless partition verification refuses it)", None,
              ("leader-output", "leader-input"), OrphanTransaction),
)
