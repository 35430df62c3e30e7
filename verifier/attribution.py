"""Whose anomaly it is: the classic transaction protocol's, or a candidate against a client or broker.

On the classic protocol (a ``transaction.version`` 1 cluster, or a client without KIP-890 part 2
on any cluster) a late EndTxn can end a later transaction of the same transactional id whatever
the client does: KAFKA-17754 (docs/findings.md F1). An anomaly there is not evidence against the
client. Only where the transaction ran KIP-890's protocol is an anomaly a candidate finding
against the client (or the broker), and its clean control is the same campaign with the Java
client on TV2 (docs/clients.md).

Each safety anomaly case gets one label, from what the run observed:

- ``kafka-17754``: every transactional id the case names committed on the classic protocol (the
  coordinator's own record, ``facts.commits_by_client_tv_per_txid``), and the message proxy saw a
  late EndTxn of one of them end a later transaction (``facts.late_requests``): the mechanism, seen;
- ``classic-protocol``: classic, and the mechanism was not seen (no message faults, or none ended a
  transaction): the protocol allows the anomaly; nothing attributes it further;
- ``candidate``: not the classic protocol's: a lost write, torn transaction or lost input whose
  committed transaction sent a batch with an aborted batch's sequence range, which the broker
  took for a duplicate (``facts.sequence_reuse``, verifier/sequences.py: the client's, F21, by
  either path: a failed send's numbers given back, or an unanswered batch's given back by the
  abort, issue 76); an
  aborted read made visible by a COMMIT marker the coordinator's log never prepared
  (``facts.commit_markers``, verifier/markers.py: the broker's, F8); every id the case names
  committed under KIP-890, or
  the anomaly is not a shape KAFKA-17754 makes (``SHAPES``; a duplicate one transaction wrote
  twice; a lost input its own consumer went on past after aborting it, ``passed_over``; an
  offset moved back by a member the group had moved on from, ``partition_moved_to``; a lost
  write whose missing outputs the raw log does not hold at all, ``outputs.in_raw_log``; a stray
  offset commit that no sender's request can have written, ``carried``, and a lost input, a
  duplicate or an offset moved back that such a commit made; a duplicate in the range an
  offsets-backwards candidate moved the group's offset back over, one below that move's lower
  offset that a transaction sending the lower offset read again, or one a copy of which a
  zombie's transaction wrote, one whose offset commit moved a partition back after the group had
  given it to another member; a duplicate a process read again after it was assigned the
  partition while the earlier copy's transaction was committing its offsets, ``reread``; a torn
  transaction or lost input of a transaction whose lost write was never written): a
  candidate against the client or the broker, whose clean control is the same campaign with the
  Java client on TV2;
- ``unattributed``: the case names no transactional id, the log recorded no commit of its ids, or
  they committed under both protocols (a ``transaction.version`` flip).

Liveness anomalies are not labelled: they describe the cluster or the pipeline after the heal,
not one transaction's protocol. Computed once from the merged results, so both engines' runs
read the same meaning.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from kchaos.verifier.markers import covering_marker
from kchaos.verifier.sequences import reuses_for
from kchaos.verifier.model import case_names
from kchaos.verifier.results import LIVENESS_CHECKS

LABELS = ("kafka-17754", "classic-protocol", "candidate", "unattributed")
#: what a late EndTxn that ends a later transaction leaves (docs/findings.md F1: the client then
#: commits or aborts a transaction the coordinator already ended, and writes on in a new one)
SHAPES = frozenset({"aborted-read", "duplicate", "lost-input", "lost-write", "split-transaction",
                    "stray-offset-commit", "torn-transaction", "zombie-write"})
#: each label as the log line and the report say it (after a count of cases)
WORDS = {"kafka-17754": "the classic protocol's (KAFKA-17754, its late EndTxn seen)",
         "classic-protocol": "on the classic protocol (KAFKA-17754 allows them; mechanism not seen)",
         "candidate": "not the classic protocol's (candidates against a client or broker)",
         "unattributed": "unattributed"}
KIP890_TV = "2"


def _case_ids(case: Any, known: set[str]) -> set[str]:
    """The transactional ids a case names: its ``txid``/``transactional_id`` fields, and the
    id of each worker slot it names (an id of this run that ends with ``-<slot>``)."""
    _, slots, ids = case_names(case)
    return ids | {txid for txid in known for slot in slots if txid.endswith(f"-{slot}")}


def _written_by_one_transaction(case: Any) -> bool:
    """Whether every copy of a duplicate case names one and the same client transaction."""
    records = case.get("records") if isinstance(case, dict) else None
    writers = {(r.get("txid"), r.get("txn_seq"), r.get("incarnation")) for r in records or [] if isinstance(r, dict)}
    return len(records or []) > 1 and len(writers) == 1 and None not in next(iter(writers))


def protocol_of(counts: dict[str, int] | None) -> str | None:
    """``classic``, ``kip-890``, ``both`` or None (no commit recorded), from one id's commits by
    the client transaction version the coordinator recorded (``"2"``: KIP-890)."""
    versions = {v for v, n in (counts or {}).items() if n}
    if not versions:
        return None
    if versions == {KIP890_TV}:
        return "kip-890"
    return "both" if KIP890_TV in versions else "classic"


def carried_strays(anomalies: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """The stray offset commits no sender's request can have written (``carried``), each as its
    partition, the offset it moved from and the one it committed."""
    return [{"partition": c["offset_commit"]["partition"], "from": c.get("moved_from"), "to": c["offset_commit"]["offset"]}
            for c in anomalies.get("stray-offset-commit") or [] if isinstance(c, dict) and c.get("carried")]


def _moved_by_stray(anomaly: str, case: Any, strays: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The carried stray commit that explains a lost input (it moved the partition's offset from at
    or below the input to past it) or an offset moved back (it is the lower commit), if any. The
    duplicates a move back makes follow from the offsets-backwards case (_relabel_duplicates)."""
    if not isinstance(case, dict):
        return None
    if anomaly == "lost-input" and isinstance(case.get("input"), dict):
        p, o = case["input"].get("partition"), case["input"].get("offset")
        return next((s for s in strays if s["partition"] == p and s["from"] is not None and s["from"] <= o < s["to"]),
                    None)
    if anomaly == "offsets-backwards" and len(case.get("offset_commits") or []) == 2:
        after = case["offset_commits"][1]
        return next((s for s in strays if (s["partition"], s["to"]) == (after["partition"], after["offset"])), None)
    return None


def _made_visible_by_unprepared(anomaly: str, case: Any, unprepared: list[dict[str, Any]]) -> dict[str, Any] | None:
    """For an aborted-read case: the COMMIT marker the coordinator's log never prepared
    (markers.py) that made the case's records visible, if such markers made every one of them
    visible (the first); else None. (A torn transaction's case lists the records that are not
    visible, so the markers that made the rest visible are not matched to it.)"""
    if anomaly != "aborted-read" or not isinstance(case, dict) or not unprepared or not case.get("records"):
        return None
    pids = {t["producer_id"] for t in case.get("transactions") or [] if isinstance(t, dict) and t.get("producer_id") is not None}
    found = [covering_marker(unprepared, r.get("topic"), r.get("partition"), r.get("offset"), pids)
             for r in case["records"] if isinstance(r, dict)]
    return found[0] if found and all(found) else None


#: the anomalies a batch answered as a duplicate and never written makes (sequences.py)
UNWRITTEN = ("lost-write", "torn-transaction", "lost-input")


def _written_as_duplicate(anomaly: str, case: Any, reused: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The sequence reuses (sequences.py) whose unwritten batches one of the case's committed
    transactions sent: those of the first such transaction, one per partition."""
    if anomaly not in UNWRITTEN or not isinstance(case, dict) or not reused:
        return []
    txns = {(t.get("process"), t.get("txn_seq")) for t in case.get("transactions") or []
            if isinstance(t, dict) and t.get("outcome") in (None, "committed")}
    txns |= {(f"{r['worker']}.{r['incarnation']}", r.get("txn_seq")) for r in case.get("records") or []
             if isinstance(r, dict) and r.get("worker") and r.get("incarnation") is not None}
    return next((found for process, seq in sorted(txns, key=str) if process and seq is not None
                 for found in [reuses_for(reused, process, seq)] if found), [])


def _reuse_text(r: dict[str, Any]) -> str:
    x = r["aborted_batch"]
    if r.get("path") == "aborted-unanswered":
        abort, reason = r.get("abort_marker") or {}, (r.get("abort") or {}).get("reason")
        how = (f"whose send succeeded and which its client aborted{f' ({reason})' if reason else ''} after the "
               f"partition's leader changed (leader epoch {x.get('leader_epoch')} to {abort.get('leader_epoch')} "
               f"at the ABORT marker at offset {abort.get('offset')}): its answer may never have come, and the "
               "abort gave its numbers back (issue 76: librdkafka's purge of the queued retry)")
    else:
        how = "whose send failed"
    return (f"{r['topic']}-{r['partition']} (the aborted batch at offset {x['offset']}, base sequence "
            f"{x['base_sequence']}, {x['count']} record{'' if x['count'] == 1 else 's'}, of "
            f"{x['transaction'][0]}'s transaction {x['transaction'][1]}, {how}; the producer's next "
            f"batch there starts at {r['next_batch']['base_sequence']}, and the commit marker at offset "
            f"{r['empty_commit']['offset']} ends a range with no batch of it)")


def label_case(anomaly: str, case: Any, per_txid: dict[str, dict[str, int]], ended_by_late: set[str],
               strays: list[dict[str, Any]] | None = None, unprepared: list[dict[str, Any]] | None = None,
               reused: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """One case of type ``anomaly``: its label and why (see the module's docstring). ``strays``:
    the run's carried stray offset commits (carried_strays); ``unprepared``: the COMMIT markers
    the coordinator's log never prepared (the ``commit_markers`` fact); ``reused``: the sequence
    ranges sent again after an abort (the ``sequence_reuse`` fact)."""
    ids = sorted(_case_ids(case, set(per_txid)))
    reuses = _written_as_duplicate(anomaly, case, reused or [])
    if reuses:
        return {"label": "candidate", "txids": ids,
                "why": "its transaction sent batches with the sequence numbers of aborted batches, on "
                       + "; and on ".join(_reuse_text(r) for r in reuses)
                       + ". The broker answers such a batch as a duplicate and writes nothing (docs/findings.md F21): "
                         "the client's, which gave the numbers back and used them again under the same epoch"}
    marker = _made_visible_by_unprepared(anomaly, case, unprepared or [])
    if marker:
        log = marker["log"]
        return {"label": "candidate", "txids": ids,
                "why": f"the COMMIT marker that made its records visible ({marker['topic']}-{marker['partition']} offset "
                       f"{marker['offset']}, coordinator epoch {marker['coordinator_epoch']}) was written while the "
                       f"surviving transaction log's latest record of producer {marker['producer_id']} was "
                       f"{log['status']} ({log['before_marker_ms']} ms before): a coordinator acted on a PrepareCommit "
                       "the log no longer holds (docs/findings.md F8: records above the high watermark, truncated "
                       "when the partition moved); the broker's, on either protocol"}
    stray = _moved_by_stray(anomaly, case, strays or [])
    if stray:
        return {"label": "candidate", "txids": ids,
                "why": f"the group's offset of partition {stray['partition']} moved from {stray['from']} to "
                       f"{stray['to']} by an offset commit that no request of a transaction that sent it can have "
                       "written (stray-offset-commit): another transaction carried it; the client's; its control is "
                       "the same campaign with the Java client on TV2"}
    if not ids:
        return {"label": "unattributed", "why": "the case names no transactional id"}
    protocols = {txid: protocol_of(per_txid.get(txid)) for txid in ids}
    unknown = sorted(t for t, p in protocols.items() if p is None)
    if unknown:
        return {"label": "unattributed", "txids": ids,
                "why": f"the coordinator's log recorded no commit of {', '.join(unknown)}"}
    kinds = set(protocols.values())
    if kinds != {"classic"} and kinds != {"kip-890"}:
        return {"label": "unattributed", "txids": ids,
                "why": "its ids committed under both protocols (classic and KIP-890)"}
    if kinds == {"kip-890"}:
        return {"label": "candidate", "txids": ids,
                "why": "every id committed under KIP-890: not the classic protocol's; its control is the same "
                       "campaign with the Java client on TV2"}
    if anomaly == "duplicate" and _written_by_one_transaction(case):
        return {"label": "candidate", "txids": ids,
                "why": "one transaction wrote the input twice (a late EndTxn makes copies in two transactions: "
                       "the client's retry inside a transaction does this); its control is the same campaign "
                       "with the Java client on TV2"}
    passed = case.get("passed_over") if isinstance(case, dict) else None
    if anomaly == "lost-input" and passed:
        return {"label": "candidate", "txids": ids,
                "why": f"every transaction that held the input aborted, and {passed['process']} went on past it "
                       f"(transaction {passed['next_txn_seq']} from offset {passed['next_first_offset']}, committed) "
                       "without going back: the consumer's recovery after an abort, not a late EndTxn (which ends "
                       "transactions, not a consumer's position); its control is the same campaign with the Java "
                       "client on TV2"}
    outputs = case.get("outputs") if anomaly == "lost-write" and isinstance(case, dict) else None
    seen_commit = isinstance(case, dict) and (case.get("transaction") or {}).get("outcome") == "committed"
    never_written = bool(outputs) and outputs.get("in_raw_log") is not None \
        and outputs["in_raw_log"] <= outputs.get("visible", -1)
    if seen_commit and never_written:
        return {"label": "candidate", "txids": ids,
                "why": f"{outputs['expected'] - outputs['visible']} of its {outputs['expected']} outputs are nowhere in the "
                       "log, committed or not: never written under the transaction (a late EndTxn aborts records "
                       "that were written; it does not unwrite them); the client's or the broker's; its control is "
                       "the same campaign with the Java client on TV2"}
    reread = case.get("reread") if anomaly == "duplicate" and isinstance(case, dict) else None
    if reread:
        return {"label": "candidate", "txids": ids,
                "why": f"{reread['assigned']} was assigned the input's partition while {reread['process']}'s "
                       f"transaction {reread['txn_seq']}'s offsets were being committed, and read the input again: "
                       "its consumer fetched the committed offset while that offset commit was pending (KIP-447's "
                       "require_stable makes the group coordinator answer UNSTABLE_OFFSET_COMMIT until it is "
                       "stable); the client's, not a late EndTxn's; its control is the same campaign with the Java "
                       "client on TV2"}
    moved = next((w for w in case.get("written_by") or [] if w.get("partition_moved_to")), None) \
        if anomaly == "offsets-backwards" and isinstance(case, dict) else None
    if moved:
        to = moved["partition_moved_to"]
        return {"label": "candidate", "txids": ids,
                "why": f"{moved['process']}'s transaction {moved['txn_seq']} committed the lower offset after the group "
                       f"had given the partition to {to['process']}: a member the group had moved on from, whose "
                       "TxnOffsetCommit KIP-447 (its generation and member id) lets the group coordinator refuse; "
                       "the client's, not a late EndTxn's; its control is the same campaign with the Java client "
                       "on TV2"}
    if anomaly == "stray-offset-commit" and isinstance(case, dict) and case.get("carried"):
        return {"label": "candidate", "txids": ids,
                "why": "no request of a transaction that sent the offset can have written the record (the group "
                       "coordinator refused it, or stamped the record while that transaction was not sending it), so "
                       "no late EndTxn of theirs committed it: another transaction carried it, unasked; the client's; "
                       "its control is the same campaign with the Java client on TV2"}
    if anomaly not in SHAPES:
        return {"label": "candidate", "txids": ids,
                "why": f"classic protocol, but a late EndTxn does not make {anomaly}; its control is the same "
                       "campaign with the Java client on TV2"}
    seen = sorted(set(ids) & ended_by_late)
    if seen:
        return {"label": "kafka-17754", "txids": ids,
                "why": f"classic protocol, and a late EndTxn of {', '.join(seen)} ended a later transaction "
                       "(the message proxy's record)"}
    return {"label": "classic-protocol", "txids": ids,
            "why": "classic protocol, which allows it (KAFKA-17754); no late EndTxn was seen ending a transaction"}


def _by_send_time(transactions: list[Any]) -> list[dict[str, Any]]:
    """A duplicate's transactions, first sent first (their history op's invoke time; the case's own
    order where that is missing)."""
    txns = [t for t in transactions if isinstance(t, dict)]
    return sorted(txns, key=lambda t: ((t.get("history_op") or {}).get("invoke_time") is None,
                                       (t.get("history_op") or {}).get("invoke_time") or 0.0))


def _relabel_duplicates(anomalies: dict[str, list[Any]], cases: dict[str, list[dict[str, Any]]]) -> None:
    """Make the duplicates another candidate explains candidates too (in place): one processed
    again because a candidate offsets-backwards moved the group's offset back over it, one below
    such a move's lower offset that a transaction sending that offset read again (the consumer
    that moved it back had started below it: F17's reset to the partition's start), and one a
    copy of which a zombie's transaction wrote (an offsets-backwards writer that committed after the
    group had given its partition to another member, ``partition_moved_to``)."""
    backs = [(c, label) for c, label in zip(anomalies.get("offsets-backwards") or [], cases.get("offsets-backwards") or [])
             if label["label"] == "candidate" and isinstance(c, dict) and len(c.get("offset_commits") or []) == 2]
    moves = [(c["offset_commits"][0], c["offset_commits"][1], label) for c, label in backs]
    #: each candidate move back's lower commit and the transactions that sent its offset
    lowered = [(c["offset_commits"][1], {(w.get("process"), w.get("txn_seq")) for w in c.get("written_by") or []}, label)
               for c, label in backs]
    zombies = {(w.get("process"), w.get("txn_seq")): w["partition_moved_to"]
               for c in anomalies.get("offsets-backwards") or [] if isinstance(c, dict)
               for w in c.get("written_by") or [] if w.get("partition_moved_to")}
    for case, label in zip(anomalies.get("duplicate") or [], cases.get("duplicate") or []):
        if label["label"] == "candidate" or not isinstance(case, dict):
            continue
        record = (case.get("records") or [{}])[0]
        p, o = record.get("in_partition"), record.get("in_offset")
        move = next((m for m in moves if m[0]["partition"] == p and o is not None
                     and m[1]["offset"] <= o < m[0]["offset"]), None)
        later = {(t.get("process"), t.get("txn_seq")) for t in _by_send_time(case.get("transactions") or [])[1:]}
        mover = next((m for m in lowered if m[0]["partition"] == p and o is not None and o < m[0]["offset"]
                      and later & m[1]), None)
        zombie = next(((t["process"], t["txn_seq"]) for t in case.get("transactions") or []
                       if (t.get("process"), t.get("txn_seq")) in zombies), None)
        if move:
            label.update(label="candidate", why=(
                f"processed again after the group's committed offset of partition {p} moved back from "
                f"{move[0]['offset']} to {move[1]['offset']} (offsets-backwards, a candidate: {move[2]['why']})"))
        elif mover:
            again = sorted(later & mover[1], key=str)[0]
            label.update(label="candidate", why=(
                f"processed again by {again[0]}'s transaction {again[1]}, which sent the lower offset "
                f"{mover[0]['offset']} of partition {p} that a move back committed (offsets-backwards, a candidate: "
                f"{mover[2]['why']}): the consumer that moved the offset back had read from below it"))
        elif zombie:
            label.update(label="candidate", why=(
                f"one copy is {zombie[0]}'s transaction {zombie[1]}, which committed after the group had given its "
                f"partition to {zombies[zombie].get('process')} (offsets-backwards): a zombie's write, which KIP-447 "
                "(the generation in TxnOffsetCommit) lets the group coordinator refuse; the client's; its control is "
                "the same campaign with the Java client on TV2"))


def _relabel_unwritten(anomalies: dict[str, list[Any]], cases: dict[str, list[dict[str, Any]]]) -> None:
    """Make the torn transactions and lost inputs of a transaction whose lost-write case is a
    candidate because its missing outputs were never written (``outputs.in_raw_log``) candidates
    too (in place): the same records missing, seen from an input or a topic; a late EndTxn
    aborts what was written, it does not unwrite it."""
    unwritten = {}
    for case, label in zip(anomalies.get("lost-write") or [], cases.get("lost-write") or []):
        outputs = case.get("outputs") if isinstance(case, dict) else None
        txn = (case.get("transaction") or {}) if isinstance(case, dict) else {}
        if label["label"] == "candidate" and outputs and outputs.get("in_raw_log") is not None \
                and outputs["in_raw_log"] <= outputs.get("visible", -1) and txn.get("process"):
            unwritten[(txn["process"], txn.get("txn_seq"))] = outputs
    for anomaly in ("torn-transaction", "lost-input"):
        for case, label in zip(anomalies.get(anomaly) or [], cases.get(anomaly) or []):
            if label["label"] == "candidate" or not isinstance(case, dict):
                continue
            key = next(((t.get("process"), t.get("txn_seq")) for t in case.get("transactions") or []
                        if isinstance(t, dict) and t.get("outcome") == "committed"
                        and (t.get("process"), t.get("txn_seq")) in unwritten), None)
            if key:
                out = unwritten[key]
                label.update(label="candidate", why=(
                    f"{key[0]}'s transaction {key[1]} committed with {out['expected'] - out['visible']} of its "
                    f"{out['expected']} outputs nowhere in the log (its lost-write case): never written under the "
                    "transaction, which a late EndTxn does not do; the client's or the broker's; its control is "
                    "the same campaign with the Java client on TV2"))


def attribute(results: dict[str, Any]) -> dict[str, Any] | None:
    """The ``attribution`` block of results.json, or None when the run has no safety anomaly.
    ``results``: the checker's results (``anomalies`` and ``facts``)."""
    anomalies = {name: cases for name, cases in (results.get("anomalies") or {}).items()
                 if name not in LIVENESS_CHECKS and cases}
    if not anomalies:
        return None
    facts = results.get("facts") or {}
    per_txid = facts.get("commits_by_client_tv_per_txid") or {}
    late = (facts.get("late_requests") or {}).get("requests") or []
    ended_by_late = {r["transactional_id"] for r in late if r.get("ended_a_transaction") and r.get("transactional_id")}
    strays = carried_strays(anomalies)
    unprepared = (facts.get("commit_markers") or {}).get("unprepared") or []
    reused = (facts.get("sequence_reuse") or {}).get("reused") or []
    cases = {name: [label_case(name, case, per_txid, ended_by_late, strays, unprepared, reused) for case in cs]
             for name, cs in sorted(anomalies.items())}
    _relabel_duplicates(anomalies, cases)
    _relabel_unwritten(anomalies, cases)
    by_anomaly = {name: dict(Counter(c["label"] for c in labelled)) for name, labelled in cases.items()}
    labels = Counter(c["label"] for labelled in cases.values() for c in labelled)
    return {"labels": {k: labels[k] for k in LABELS if labels[k]}, "by_anomaly": by_anomaly, "cases": cases,
            "summary": summary(labels)}


def summary(labels: dict[str, int]) -> str:
    """One line: how many cases carry each label."""
    return "; ".join(f"{labels[k]} {WORDS[k]}" for k in LABELS if labels.get(k))
