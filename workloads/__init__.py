"""Workloads drive pipelines and record every operation: the transactional
consume-transform-produce pipeline (``kind = "ctp"``, workloads/ctp.py), the share-group
acknowledgement pipeline (``kind = "share"``, workloads/share.py) and transactions that send to and
poll shared partitions for the isolation checker (``kind = "txn"``, workloads/txn.py)."""

from __future__ import annotations

from typing import Any

from kchaos.workloads.ctp import CtpWorkload
from kchaos.workloads.share import ShareWorkload
from kchaos.workloads.txn import TxnWorkload


def make_workload(spec: Any, cluster: Any, run: Any, seed: int, history: Any, observers: Any = None) -> Any:
    """The workload driver for ``spec.kind``, with ``observers`` (an ObserverSpec) reading along."""
    if spec.kind == "share":
        return ShareWorkload(spec, cluster, run, seed, history, observers)
    if spec.kind == "txn":  # no observers: campaigns with them are refused on load (verifier/campaign.py)
        return TxnWorkload(spec, cluster, run, seed, history)

    return CtpWorkload(spec, cluster, run, seed, history, observers)
