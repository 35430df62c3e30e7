"""Age transactional ids towards the TV2 producer-epoch boundary before the workers start.

Under ``transaction.version`` 2 every transaction end bumps the producer epoch, and at an
exhausted epoch (``Short.MAX_VALUE - 1``) the coordinator moves the id to a new producer id
with epoch 0 (KIP-890). Three published Kafka bugs sit at that move (docs/findings.md F5); a run
reaches it only after about 32,766 transactions of one id. Ageing gets there in seconds: each
InitProducerId for an id with nothing open bumps its epoch by one (kchaos/protocol/raw_init.py), so
``32766 - epochs_before_rollover`` of them leave a worker that many bumps before the boundary
(the next worker twice as many, and so on: :func:`staggered_targets`).

Each id is aged by one thread on its own connection to its coordinator. The history records one
``age-epoch`` operation per id: its target, the producer id and epoch reached, how many
InitProducerIds it took and how long.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from kchaos.errors import ClusterError
from kchaos.protocol.raw_init import CoordinatorConnection, find_coordinator
from kchaos.workloads.history import HistoryWriter

#: Short.MAX_VALUE - 1: the epoch at which the coordinator rotates the producer id
EXHAUSTED_EPOCH = 32766
#: answers that mean "ask again shortly" (a coordinator loading or moving)
RETRIABLE = {"COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR", "CONCURRENT_TRANSACTIONS",
             "REQUEST_TIMED_OUT"}


def target_epoch(epochs_before_rollover: int) -> int:
    """The epoch ageing stops at: that many bumps left before the exhausted epoch."""
    return EXHAUSTED_EPOCH - epochs_before_rollover


def staggered_targets(count: int, epochs_before_rollover: int) -> list[int]:
    """Each id's target: the first is left ``epochs_before_rollover`` bumps, the next twice as
    many, and so on, so the ids cross the boundary one after another, each while another fault
    runs (all at once, one run met the boundary under one fault only)."""
    return [max(0, target_epoch(epochs_before_rollover * (i + 1))) for i in range(count)]


def age_one(brokers: list[tuple[str, int]], txid: str, target: int, timeout_ms: int, deadline: float,
            cancelled: Callable[[], bool] = lambda: False) -> dict[str, Any]:
    """InitProducerId for ``txid`` until its epoch is ``target`` or more; what was reached. Raises
    ClusterError past ``deadline`` (time.monotonic()) or once ``cancelled()``."""
    started = time.monotonic()
    inits = attempts = 0
    last_error = "no answer yet"
    producer_id = epoch = -1
    while time.monotonic() < deadline and not cancelled():
        host, port = brokers[attempts % len(brokers)]
        attempts += 1
        try:
            error, _, host, port = find_coordinator(host, port, txid)
            if error != "NONE":
                last_error = f"FindCoordinator: {error}"
                time.sleep(0.2)  # the coordinator is being elected or loaded: nothing to wait on but a new answer
                continue
            with CoordinatorConnection(host, port) as conn:
                while time.monotonic() < deadline and not cancelled():
                    error, producer_id, epoch = conn.init(txid, timeout_ms)
                    inits += 1
                    if error == "NONE":
                        if epoch >= target:
                            return {"txid": txid, "target_epoch": target, "producer_id": producer_id, "epoch": epoch,
                                    "inits": inits, "seconds": round(time.monotonic() - started, 2)}
                        continue
                    last_error = f"InitProducerId: {error}"
                    if error not in RETRIABLE:
                        raise ClusterError(f"ageing {txid}: InitProducerId answered {error} at epoch {epoch}")
                    time.sleep(0.2)
                    break  # find the coordinator again
        except OSError as exc:
            last_error = repr(exc)
            time.sleep(0.2)
    raise ClusterError(f"ageing {txid} to epoch {target}: {'cancelled' if cancelled() else 'not reached in time'} (epoch {epoch}, producer id {producer_id}, "
                       f"{inits} requests; last: {last_error})")


def age_transactional_ids(brokers: list[tuple[str, int]], txids: list[str], epochs_before_rollover: int,
                          timeout_ms: int, history: HistoryWriter, timeout_s: float = 600.0) -> list[dict[str, Any]]:
    """Age every id in ``txids`` in parallel to its :func:`staggered_targets` epoch; each is one
    ``age-epoch`` operation in ``history``. Raises ClusterError (after recording it) if an id
    cannot be aged."""
    targets = dict(zip(txids, staggered_targets(len(txids), epochs_before_rollover)))
    deadline = time.monotonic() + timeout_s
    # Ctrl-C lands in the caller's thread; the pool's threads must notice it too, or leaving the
    # pool would wait for every id's ageing (minutes) before the run can wind down.
    cancel = threading.Event()

    def age(txid: str) -> dict[str, Any]:
        target = targets[txid]
        op = history.invoke("age-epoch", {"txid": txid, "target_epoch": target})
        try:
            reached = age_one(brokers, txid, target, timeout_ms, deadline, cancel.is_set)
        except Exception as exc:
            history.complete(op, "age-epoch", "fail", {"txid": txid, "target_epoch": target}, error=str(exc))
            raise
        history.complete(op, "age-epoch", "ok", reached)
        return reached

    with ThreadPoolExecutor(max(1, len(txids)), thread_name_prefix="kchaos-age") as pool:
        try:
            return list(pool.map(age, txids))
        except BaseException:
            cancel.set()
            raise
