"""What the group coordinator's log (``__consumer_offsets``) says about the pipeline's offset commits.

An exactly-once transaction commits its outputs and its consumer offsets together; the final
group offsets show only the last commit per partition, so a commit that was lost, or one that
moved a partition back, is hidden by the next one. The decoded log shows each of them. Both
engines collect the group's commits of the input topic to the driver (one per transaction and
partition, few; verifier/internal_topics.offset_commit_batches decodes them for both), so these
checks are one function each, here.

``offset_log``: the committed view's offset commits of the group and input topic, dicts with
``log_partition, log_offset, partition, offset, commit_timestamp``. The committed view leaves
out the offset commits of aborted transactions, so what remains is what a restart would read.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Callable

from kchaos.verifier.checks import explain
from kchaos.verifier.coordinator_log import CLOCK_EPS_MS

#: offset commits shown around a missing one
NEIGHBOURS = 2


def committed_offsets_of(history: Any) -> dict[tuple[str, int], dict[int, int]]:
    """Per client transaction the client saw commit (a transactional commit, or the negative
    controls' consumer commit): the offsets it committed, from its successful commit operation
    (or, where that does not repeat them, the transaction's ``send_offsets``)."""
    sent: dict[tuple[str, int], dict[str, Any]] = {}
    out: dict[tuple[str, int], dict[int, int]] = {}
    for op in history.ops:
        seq = op["value"].get("txn_seq")
        if seq is None:
            continue
        if op["f"] == "send_offsets":
            sent[(op["process"], seq)] = op["value"].get("offsets") or {}
        elif op["f"] in ("commit", "commit_offsets") and op["outcome"] == "ok":
            offsets = op["value"].get("offsets") or sent.get((op["process"], seq)) or {}
            if offsets:
                out[(op["process"], seq)] = {int(p): int(o) for p, o in offsets.items()}
    return out


def lost_offset_commit_cases(history: Any, offset_log: list[dict[str, Any]], topic: str, clean: int | None = 0,
                             cut: bool = False, past_view: set[tuple[int, int]] | None = None,
                             ) -> tuple[list[dict[str, Any]], int, dict[str, int]]:
    """A transaction the client saw commit whose offset commit is not in the committed offsets
    log: its outputs may be visible, but a restart would not know its inputs were processed.

    Only what the log may rightly no longer hold is set aside, each as the world could make it:

    - ``clean``: the offset up to which the log cleaner compacted the group's partition (its own
      checkpoint; 0: nothing; None: unknown, so anywhere). The cleaner removes a commit only for a
      later record of the same key (the group, topic and input partition) below that point, so a
      missing commit is set aside only when the first commit of its input partition after it lies
      below the point. The last commit of a partition, and one whose next commit lies at or past
      the point, were never removable.
    - ``cut``: the partition's committed view stops before its log ends (a transaction left open
      pins it). A commit with no later one in the view may lie past that end: set aside only where
      the raw view holds it there (``past_view``: the (input partition, offset) commits the raw
      view holds at or past the committed view's end); None: the raw view was not read, and such
      commits are set aside as unread, said apart.

    Set-aside commits are counted, never judged. Returns the cases, how many committed
    transactions had offsets to look for, and the set-aside counts by reason."""
    present: set[tuple[int, int]] = {(c["partition"], c["offset"]) for c in offset_log}
    by_partition: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for c in offset_log:
        by_partition[c["partition"]].append(c)
    for commits in by_partition.values():
        commits.sort(key=lambda c: c["offset"])
    cases = []
    set_aside: dict[str, int] = defaultdict(int)
    committed = committed_offsets_of(history)
    for key, offsets in sorted(committed.items()):
        missing = []
        for p, o in sorted(offsets.items()):
            if (p, o) in present:
                continue
            later = [c["log_offset"] for c in by_partition.get(p, []) if c["offset"] > o]
            if later and clean != 0 and (clean is None or min(later) < clean):
                set_aside["compacted"] += 1
            elif not later and cut and past_view is None:
                set_aside["past the committed view, unread"] += 1
            elif not later and cut and (p, o) in past_view:
                set_aside["past the committed view"] += 1
            else:
                missing.append((p, o))
        if not missing:
            continue
        around = {}
        for p, o in missing:
            commits = by_partition.get(p, [])
            below = [c for c in commits if c["offset"] < o][-NEIGHBOURS:]
            above = [c for c in commits if c["offset"] > o][:NEIGHBOURS]
            around[str(p)] = below + above
        cases.append({"explanation": explain("lost-offset-commit", seq=key[1], process=key[0], topic=topic,
                                             commits=", ".join(f"{p} -> {o}" for p, o in missing)),
                      "transactions": [history.txn_evidence(key)],
                      "missing": [{"topic": topic, "partition": p, "offset": o} for p, o in missing],
                      "offset_commits_around": around})
    return cases, len(committed), dict(set_aside)


def offsets_backwards_cases(offset_log: list[dict[str, Any]], topic: str, history: Any = None) -> list[dict[str, Any]]:
    """A group's committed offset of one input partition that moved back: the inputs between the
    two positions would be processed again by whoever reads the later commit. Judged in the
    order the group coordinator wrote the commits (log order: a group's commits share one
    ``__consumer_offsets`` partition). With the clients' ``history``, each case names the client
    transactions that committed the lower offset (``written_by``), and for each the member the
    group had given the partition to before its commit returned, if any: a member the group had
    moved on from, whose commit KIP-447 (the generation in TxnOffsetCommit) lets the coordinator
    refuse."""
    last: dict[int, dict[str, Any]] = {}
    committed = committed_offsets_of(history) if history is not None else {}
    cases = []
    for c in sorted(offset_log, key=lambda c: (c["log_partition"], c["log_offset"])):
        before = last.get(c["partition"])
        if before is not None and c["offset"] < before["offset"]:
            case = {"explanation": explain("offsets-backwards", topic=topic, p=c["partition"],
                                           before=before["offset"], after=c["offset"]),
                    "offset_commits": [{**before, "log": f"__consumer_offsets-{before['log_partition']}"},
                                       {**c, "log": f"__consumer_offsets-{c['log_partition']}"}]}
            writers = [key for key, offsets in sorted(committed.items()) if offsets.get(c["partition"]) == c["offset"]]
            if writers:
                case["written_by"] = [_writer(history, key, c["partition"]) for key in writers]
            cases.append(case)
        last[c["partition"]] = c
    return cases


def _writer(history: Any, key: tuple[str, int], partition: int) -> dict[str, Any]:
    """A client transaction that committed a partition's offset: its evidence, and the member the
    group had given the partition to after its process was last assigned it and before its commit
    returned (``partition_moved_to``: a commit invoked before a pause lands after it), where the
    history shows one."""
    ev = history.txn_evidence(key)
    commit = next((op for op in reversed(history.txn_ends.get(key, ())) if op["f"] == "commit"), None)
    returned = commit and (commit["complete_time"] or commit["invoke_time"])
    moved = history.partition_moved(key[0], partition, returned) if returned else None
    if moved:
        ev["partition_moved_to"] = moved
    return ev


#: how the clients word the group coordinator's refusal of a TxnOffsetCommit for its member or
#: generation (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID), lowercase: it writes
#: nothing for a refused one (it checks the member before it appends)
REFUSALS = ("unknownmemberid", "unknown_member_id", "not aware of this member", "illegalgeneration",
            "illegal_generation", "generation id is not valid", "fencedinstanceid", "fenced_instance_id")


def refused(error: str | None) -> bool:
    """Whether a failed ``send_offsets`` says the group coordinator refused the offsets."""
    return bool(error) and any(word in error.lower() for word in REFUSALS)


def sent_offsets_of(history: Any) -> tuple[dict[tuple[int, int], dict[tuple[str, int], list[tuple[float, float]]]],
                                           dict[tuple[str, int], dict[str, Any]], set[tuple[str, int]], int]:
    """Every offset the clients asked to commit: (input partition, offset) -> the client
    transactions whose ``send_offsets`` (or commit, or the negative controls' consumer commit)
    carried it, each with the windows (ms, harness clock) of those operations (one that did not
    return ok, or a consumer's own commit, ends at infinity: its request may land later). Also
    each transaction's ``send_offsets`` operation; the transactions their client saw abort for certain (an abort
    that returned, and no commit asked that returned or ended unknown: such a commit may have
    taken effect before the abort); and how many transactions recorded offsets."""
    by_offset: dict[tuple[int, int], dict[tuple[str, int], list[tuple[float, float]]]] = defaultdict(dict)
    send_ops: dict[tuple[str, int], dict[str, Any]] = {}
    recorded: set[tuple[str, int]] = set()
    for op in history.ops:
        seq = op["value"].get("txn_seq")
        if seq is None or op["f"] not in ("send_offsets", "commit", "commit_offsets"):
            continue
        key = (op["process"], seq)
        if op["f"] == "send_offsets":
            send_ops[key] = op
        # a consumer's own commit (the negative controls') may be sent after its call returns
        # (an asynchronous commit): its window is not bounded
        window = (op["invoke_time"] * 1000, op["complete_time"] * 1000
                  if op["outcome"] == "ok" and op["complete_time"] is not None and op["f"] != "commit_offsets"
                  else float("inf"))
        for p, o in (op["value"].get("offsets") or {}).items():
            recorded.add(key)
            by_offset[(int(p), int(o))].setdefault(key, []).append(window)
    aborted = set()
    for key, ends in history.txn_ends.items():
        commits = [op for op in ends if op["f"] == "commit"]
        if any(op["f"] == "abort" and op["outcome"] == "ok" for op in ends) and \
                all(op["outcome"] == "fail" for op in commits):
            aborted.add(key)
    return by_offset, send_ops, aborted, len(recorded)


def _committed_in_order(history: Any) -> dict[str, list[tuple[float, tuple[str, int]]]]:
    """Per process, its transactions that its client saw commit, by when the commit returned."""
    out: dict[str, list[tuple[float, tuple[str, int]]]] = defaultdict(list)
    for key, ends in history.txn_ends.items():
        for op in ends:
            if op["f"] == "commit" and op["outcome"] == "ok":
                out[key[0]].append((op["complete_time"] or op["invoke_time"], key))
    for commits in out.values():
        commits.sort()
    return out


def stray_offset_commit_cases(history: Any, offset_log: list[dict[str, Any]], topic: str,
                              clock: tuple[float, float] | None = None,
                              unplaceable: Callable[[float], bool] | None = None,
                              ) -> tuple[list[dict[str, Any]], int, dict[str, Any]]:
    """An offset commit in the group's committed offsets log that no transaction which may have
    committed sent: sent by no transaction at all, or only by transactions their client saw abort,
    or (``clock``) written when none of those that may have committed was sending it. An aborted
    transaction's offset commit is aborted with it (the committed view leaves it out), so one that
    is committed was carried by another transaction: a client that keeps a failed transaction's
    offsets and sends them with a later one (a partition's position then jumps over inputs no
    committed transaction processed, or moves back).

    ``clock``: (the brokers' clock ahead of the harness's, the tolerance), both ms; None where it
    is not known, and then a commit is matched to its senders by value alone. The group
    coordinator stamps an offset commit with its own time when it takes the request, so a commit
    one transaction sent lies within that transaction's sending operation (which returned ok:
    one that did not may land later); ``unplaceable``: a harness-clock time (ms) a clock fault may
    have moved the stamp of, judged by value alone.

    Each case names the transactions that sent the offset, with their ``send_offsets`` outcome,
    whether the group coordinator refused it (``refused``: it then wrote nothing), whether its
    request can have written the record (``wrote_it``: not if refused, nor if the stamp lies
    outside its sending), and the next transaction its process saw commit after it
    (``next_committed``, the likely carrier); and the partition's offset the log held before it
    (``moved_from``; None: its first commit). ``carried`` on the case: no sender's request can
    have written the record, so another transaction's did, and no late EndTxn of a sender's
    transaction can have committed it.

    Returns the cases, how many transactions recorded offsets, and the timing: how many commits
    with such senders were placed in one's window and how many outside, and ``by_value_only`` (no
    clock, or more outside than placed: the stamps do not line up, so none was judged by time)."""
    sent, send_ops, aborted, recorded = sent_offsets_of(history)
    committed_after = _committed_in_order(history)
    eps = CLOCK_EPS_MS + (clock[1] if clock else 0.0)

    def stamp(c: dict[str, Any]) -> float | None:
        """A commit's stamp on the harness's clock, or None where it cannot be placed."""
        if clock is None or c.get("commit_timestamp") is None:
            return None
        at = c["commit_timestamp"] - clock[0]
        return None if unplaceable is not None and unplaceable(at) else at

    def sending(at: float, key: tuple[str, int], c: dict[str, Any]) -> bool:
        """Whether transaction ``key`` was sending ``c``'s offset at ``at``."""
        return any(lo - eps <= at <= hi + eps for lo, hi in sent[(c["partition"], c["offset"])][key])

    def sender(key: tuple[str, int], c: dict[str, Any], at: float | None) -> dict[str, Any]:
        ev = history.txn_evidence(key)
        op = send_ops.get(key)
        no = op is not None and op["outcome"] == "fail" and refused(op.get("error"))
        if op is not None:
            ev["send_offsets"] = {"outcome": op["outcome"], "error": op.get("error"), "refused": no}
        # whether its request can have written the record: not if the coordinator refused it (it
        # writes nothing then), nor if it stamped the record while this one was not sending it
        ev["wrote_it"] = ("no: the group coordinator refused it" if no else "no: stamped outside its sending"
                          if at is not None and not sending(at, key, c) else "maybe")
        ends = history.txn_ends.get(key)
        ended = max(op["complete_time"] or op["invoke_time"] for op in ends) if ends else None
        carrier = next((k for t, k in committed_after.get(key[0], ()) if ended is not None and t > ended), None)
        if carrier is not None:
            ev["next_committed"] = history.txn_evidence(carrier)
        return ev

    log = sorted(offset_log, key=lambda c: (c["log_partition"], c["log_offset"]))
    placed: dict[int, bool | None] = {}  # a commit with a sender that may have committed: in its window?
    for c in log:
        live = [k for k in sent.get((c["partition"], c["offset"]), {}) if k not in aborted]
        if live:
            at = stamp(c)
            placed[id(c)] = None if at is None else any(sending(at, k, c) for k in live)
    timing = {"placed": sum(1 for v in placed.values() if v), "outside": sum(1 for v in placed.values() if v is False)}
    # stamps that mostly miss their senders' windows say the clocks do not line up (a wrong
    # measurement), not that most commits were carried: then match by value alone
    timing["by_value_only"] = clock is None or timing["outside"] > timing["placed"]
    cases = []
    before: dict[int, int] = {}
    for c in log:
        previous = before.get(c["partition"])
        before[c["partition"]] = c["offset"]
        if id(c) in placed and (placed[id(c)] is not False or timing["by_value_only"]):
            continue
        senders = sent.get((c["partition"], c["offset"]), {})
        at = None if timing["by_value_only"] else stamp(c)
        evidence = [sender(key, c, at) for key in senders]
        names = ", ".join(f"{k[0]}'s {k[1]}" for k in list(senders)[:5]) + \
            (f" and {len(senders) - 5} more" if len(senders) > 5 else "")
        if id(c) in placed:
            explanation = explain("stray-offset-commit.outside", topic=topic, p=c["partition"], o=c["offset"],
                                  at=at / 1000, senders=names)
        elif senders:
            explanation = explain("stray-offset-commit.aborted", topic=topic, p=c["partition"], o=c["offset"],
                                  senders=names)
        else:
            explanation = explain("stray-offset-commit", topic=topic, p=c["partition"], o=c["offset"])
        cases.append({"explanation": explanation,
                      "offset_commit": {**c, "log": f"__consumer_offsets-{c['log_partition']}"},
                      "moved_from": previous,
                      "carried": all(ev["wrote_it"] != "maybe" for ev in evidence),
                      "transactions": evidence})
    return cases, recorded, timing
