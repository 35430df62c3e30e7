"""What each check means, defined once for both engines: the registry.

One entry per check (:class:`CheckDef`) carries its anomaly name, what a case is, when it cannot
be made on a run and what it says then (``requires``), and the explanation of every kind of case
it reports. The engine interface is made from the registry (verifier/engine.py): each check's
query is the engine method named after it (``zombie-write`` -> ``zombie_write``). The Python
reference (verifier/pychecker.py), the Spark job (verifier/spark/checks.py), the driver-side
checks both run (verifier/driver_checks.py) and the share ledger (verifier/share_checks.py) each
register their function for a check (:func:`implements`) and hold only their *query*: which
records, transactions or log entries make a case. So adding a check is one entry here and two
functions, two engines cannot word, gate or count the same check differently, and
``case_keys`` can compare them case by case (tests/integration/test_differential.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, TypeVar

from kchaos.verifier import evidence
from kchaos.verifier.model import MAX_CASES, ORDER_PROMISED_DELIVERY, NotApplicable, case_place
from kchaos.verifier.results import INVALID, LIVENESS_CHECKS, UNKNOWN, VALID, CheckResult

#: Notes on a check's result that are not cases.
NOTES = {
    "cases": "{n} cases",
    "no-progress.vacuous": "vacuous: {committed} committed transactions, {outputs} committed outputs",
    "no-progress.ok": "{committed} committed transactions",
    "no-progress.from-log": " (counted in the coordinator's log: the pipeline left no client history)",
    "split-transaction.matched-nothing": ("no coordinator transaction could be matched to any of the client's "
                                          "committed transactions: the coordinator's log and the history do not line "
                                          "up, so nothing was judged"),
    "lost-offset-commit.recorded-nothing": ("the history records no offsets for the {n} committed transactions: "
                                            "nothing to look for"),
    "stray-offset-commit.recorded-nothing": ("the history records no offsets sent by any transaction: nothing to "
                                             "match the group's {n} offset commits against"),
    "set-aside.history-hole": ("{n} of processes whose history has a hole ({processes}): a coordinator "
                               "transaction of theirs may belong to a transaction the history lost"),
    "stray-offset-commit.by-value": ("; matched by value alone: the group coordinator's stamps do not line up "
                                     "with the history ({outside} outside their senders' windows, {placed} in one)"),
    "observer-window": "judged on the reads made before the failure only: {failed}",
    "set-aside": "; set aside, as the log may rightly no longer hold them: {why}",
    "set-aside.compacted": ("{n} below where the log cleaner compacted {log} ({clean}), each followed by a commit "
                            "of the same partition that lies below that point too"),
    "set-aside.past the committed view": ("{n} past the end of {log}'s committed view ({view} of {end}: a "
                                          "transaction left open pins it), where its raw view holds them"),
    "lost-offset-commit.unplaced": ("not judged: {n} with no later commit, while a transaction left open pins "
                                    "{log}'s committed view ({view} of {end}) and its raw view, which would show them "
                                    "past its end, was not read"),
    "set-aside.clock-skewed": ("; set aside, as clock faults had moved a broker's clock while they ran (their "
                               "coordinator stamps cannot be placed on the harness's clock): {n} client transactions, "
                               "{m} coordinator transactions"),
    "split-transaction.all-clock-skewed": ("every client transaction ({n}) overlapped a clock fault's window: their "
                                           "coordinator stamps cannot be placed on the harness's clock, so nothing "
                                           "was judged"),
    "set-aside.stale-accept": ("; set aside, as a stale acknowledgement's answer says nothing (Kafka answers one "
                               "without error once the record is below the start offset): {n} ACCEPTs sent after the "
                               "record had been delivered again"),
    "stalled-pipeline.drained": "every committed input was processed within the drain's bound{took}{rates}",
    "stalled-pipeline.caught-up": ("the drain's {bound:.0f} s ran out, but by the final reads every committed input "
                                   "was processed{rates}"),
    "hung-client-call.none": "no pipeline process was stuck in a client call at the drain's end (bound {bound:.0f} s)",
    "unprocessed-assignment.none-left": "every committed input was processed: no partition was left to nobody",
    "unprocessed-assignment.members-only": ("; the group coordinator's view was not recorded ({why}): judged on the "
                                            "members' own account"),
    "unprocessed-assignment.held": ("{n} unprocessed partitions are held by a running instance by both accounts "
                                    "(see stalled-pipeline)"),
    "broker-not-rejoined.ok": "every broker registered and every partition of the run's topics led at the run's end ({source})",
    "broker-not-rejoined.leaders-unread": ("every broker registered at the run's end ({source}), but the partition "
                                           "leaders at the run's end were not read ({why}): leadership not judged"),
    "set-aside.unrecorded-compacted": ("{n} client transactions of {ids} that the log holds no record of, each "
                                       "followed by a record of its id below where the log cleaner compacted its "
                                       "partition ({where})"),
}


def explain(kind: str, **fields: Any) -> str:
    return EXPLANATIONS[kind].format(**fields)


def reread_evidence(history: Any, p: int, records: list[Any]) -> dict[str, Any]:
    """A duplicate's ``reread`` field (both engines): its copies are two committed transactions,
    and the later one's process was assigned the input's partition while the earlier one's
    offsets were being committed (HistoryIndex.assigned_during_commit), so it read the input
    again from the offset before that commit."""
    keys = sorted({(f"{r['worker']}.{r['incarnation']}", r["txn_seq"]) for r in records if r.get("worker")})
    if len(keys) != 2 or any(history.txn_outcome.get(k) != "committed" for k in keys):
        return {}
    first, second = sorted(keys, key=lambda k: history.commit_requested(k) or 0.0)
    seen = history.assigned_during_commit(first, p, second[0])
    return {"reread": seen} if seen else {}


def passed_over_evidence(history: Any, p: int, o: int) -> dict[str, Any]:
    """A lost input's ``passed_over`` field (both engines): how its consumer went on past it after
    aborting every transaction that held it (HistoryIndex.passed_over), when the history shows it."""
    seen = history.passed_over(p, o)
    return {"passed_over": seen} if seen else {}


def lost_write_text(key: tuple[str, int], seen: int, expected: int, outcome: str) -> str:
    """A lost-write case's explanation: the client saw the commit (``outcome`` committed), or the
    coordinator's log shows it while the client saw otherwise."""
    if outcome == "committed":
        return explain("lost-write", seq=key[1], process=key[0], seen=seen, expected=expected)
    return explain("lost-write.coordinator-commit", seq=key[1], process=key[0], seen_outputs=seen, expected=expected,
                   seen={"commit-failed": "saw the commit fail", "aborted": "aborted it"}.get(outcome,
                                                                                             "never learned the end"))


#: what names one output of a transaction: its input and its slot (the n-th output of that input)
OUTPUT_ID = ("in_partition", "in_offset", "slot")


def output_id(out: Any) -> tuple[Any, ...]:
    return tuple(out[c] for c in OUTPUT_ID)


def lost_write_outputs(seen: int, expected: int, in_raw_log: int) -> dict[str, Any]:
    """A lost-write case's ``outputs`` field (both engines): how many outputs the transaction
    wrote by its client's count, how many distinct ones (``OUTPUT_ID``) are visible, and how many
    distinct ones of it the raw view holds, committed or not. When the raw log holds no more than
    the visible ones, the rest were never written to any log under the transaction: not aborted
    by a marker, never there."""
    return {"outputs": {"expected": expected, "visible": seen, "in_raw_log": in_raw_log}}


def before_commit_text(observed_at: float, commit_requested: float) -> str:
    """When an observer read an output, against its transaction's commit request (seconds, one
    clock): the ``when`` of an observed-aborted-read.before-commit case."""
    return f"{round((commit_requested - observed_at) * 1000)} ms before its client asked to commit it"


def before_seed_text(observed_at: float, seed_invoked: float) -> str:
    """When an observer read an input, against the start of the seeder's transaction that wrote it
    (its ``seed`` invoke: the seeder records no commit request of its own): the ``when`` of an
    observed-aborted-read.before-seed case."""
    return f"{round((seed_invoked - observed_at) * 1000)} ms before the seeder began it"


@dataclass(frozen=True)
class Requirement:
    """What a check needs from the run, and what it says when the run does not have it: a
    verdict with a note, or (verdict None) ``not_checked`` with the note as the reason. Whether
    an unmet requirement reaches the verdict is not decided here: a check the workload claims
    (:func:`claimed_checks`) that is ``not_checked`` makes the verdict ``unknown``."""

    needs: str
    verdict: str | None
    note: str


@dataclass(frozen=True)
class Query:
    """A check's query: the engine method named after it, called on an engine's run object."""

    __name__: str

    def __call__(self, engine: Any, data: Any) -> CheckResult:
        return getattr(engine, self.__name__)(data)


@dataclass(frozen=True)
class CheckDef:
    #: the name results carry: "zombie-write"
    anomaly: str
    #: what a case is, in one line
    meaning: str
    #: what it needs from the run, and what it says without it
    requires: tuple[Requirement, ...] = ()
    #: its case templates (explain): "" is the anomaly's own, ".split" is "<anomaly>.split"
    explanations: Mapping[str, str] = field(default_factory=dict)
    #: in a share-group run the share ledger answers it (verifier/share_checks.py), not the engines
    share_ledger: bool = False
    #: it reads what no client of the pipeline sees: a broker's own log (WHITE_BOX_CHECKS)
    reads_broker_logs: bool = False

    @property
    def name(self) -> str:
        return self.anomaly

    @property
    def query(self) -> Query:
        """The engine method that finds its cases: one spelling, derived from the anomaly."""
        return Query(self.anomaly.replace("-", "_"))


_NO_HISTORY = "no client history (external pipeline)"
_NO_OBSERVERS = "the run had no observers ([observers] count = 0)"
_NEEDS_OBSERVATIONS = Requirement("observations", None, _NO_OBSERVERS)
_NO_OFFSETS_LOG = "no __consumer_offsets dump in the run directory"
_NO_TXN_LOG = "no __transaction_state dump in the run directory"

CHECKS: tuple[CheckDef, ...] = (
    CheckDef("duplicate",
             "an (input, slot) whose output is visible more than once to read_committed readers",
             explanations={"": "input {p}@{o} slot {slot} is visible {n} times in committed outputs"},
             share_ledger=True),
    CheckDef("lost-input",
             "an input below the group's committed offset that a transaction processed, with no committed output",
             explanations={"": ("input {in_id} at {topic}/{p}@{o} is below the group's committed offset {final} "
                                "and was processed, but has no committed output")}),
    CheckDef("offsets-ahead",
             "the group's committed offset passed an input that no transaction processed",
             (Requirement("history", None, f"{_NO_HISTORY}: an unprocessed input is reported as lost-input"),),
             explanations={"": ("the group's committed offset for {topic}/{p} moved past input {in_id} at offset "
                                "{o}, which no transaction ever processed")}),
    CheckDef("torn-transaction",
             "some but not all outputs of one input, or of one transaction, are visible",
             explanations={".slots": "input {p}@{o}: only slots {have} of {k} are committed",
                           ".hidden": ("transaction {seq} of {process}: {seen} of {written} outputs are visible to "
                                       "read_committed readers, the rest are not")}),
    CheckDef("aborted-read",
             "a visible output of a transaction the client aborted or saw fail to commit, or that the coordinator's "
             "log shows aborted (its client never learned the end, or saw it commit), or derived from an aborted "
             "input; or an input the seeder aborted, visible",
             explanations={".transaction": ("committed output of transaction {seq} of {process}, which the history "
                                            "shows aborted"),
                           ".input": ("committed output derived from input {p}@{o}, which belongs to an aborted "
                                      "input transaction (read with read_uncommitted)"),
                           ".failed-commit": ("committed output of transaction {seq} of {process}, whose commit "
                                              "the client saw fail"),
                           ".coordinator-abort": ("committed output of transaction {seq} of {process}, whose end "
                                                  "its client never learned and which the coordinator's log shows "
                                                  "aborted"),
                           ".client-committed": ("committed output of transaction {seq} of {process}, which its "
                                                 "client saw commit but the coordinator's log shows aborted"),
                           ".seeder-input": ("input {in_id} at {topic}/{p}@{o}, which the seeder's transaction "
                                             "aborted, is visible to read_committed readers")}),
    CheckDef("lost-write",
             "a transaction the client saw commit, or the coordinator's log shows committed, with fewer visible outputs "
             "than it wrote",
             (Requirement("transactional", None, "not transactional: checked as lost-input/torn-transaction"),
              Requirement("history", None, f"{_NO_HISTORY}: nothing says which transactions the client saw commit"),
              Requirement("client-commits", None, "the history records no transaction the client saw commit: "
                                                  "nothing to look for")),
             explanations={"": ("the client saw transaction {seq} of {process} commit, but only {seen} of its "
                                "{expected} outputs are visible"),
                           ".coordinator-commit": ("the coordinator's log shows transaction {seq} of {process} "
                                                   "committed (its client {seen}), but only {seen_outputs} of its "
                                                   "{expected} outputs are visible")}),
    CheckDef("offsets-behind",
             "a visible output of an input at or past the group's final committed offset",
             explanations={"": ("committed output for input {p}@{o}, at or past the group's committed offset "
                                "{final}: a restart would process it again")}),
    CheckDef("split-transaction",
             "a client transaction carried by two coordinator transactions, or ended by a request that was not its "
             "own, or ended otherwise than its client saw, or missing from the coordinator's log though it committed "
             "or its outputs are visible (the coordinator's log against the client history)",
             (Requirement("transactional", None, "not transactional: there is no coordinator transaction to match"),
              Requirement("history", None, f"{_NO_HISTORY}: nothing says which client transaction each coordinator "
                                           "transaction carried"),
              Requirement("transaction-log", UNKNOWN, _NO_TXN_LOG)),
             explanations={".split": ("transaction {seq} of {process} ({txid}) was carried by {n} coordinator "
                                      "transactions: {parts}"),
                           ".ended-early": ("transaction {seq} of {process} ({txid}): the coordinator prepared to "
                                            "{prepared} it before the client {asked}: a request of another "
                                            "transaction ended it"),
                           ".ended-by-late-request": ("transaction {seq} of {process} ({txid}) was ended by a late "
                                                      "{api} ({committed}) sent before it began"),
                           ".unrecorded": ("the client saw transaction {seq} of {process} ({txid}) commit, but the "
                                           "coordinator's log holds no transaction of it"),
                           ".unrecorded-visible": ("outputs of transaction {seq} of {process} ({txid}) are "
                                                   "visible, though its client {seen} and the coordinator's log "
                                                   "holds no transaction of it"),
                           ".never-asked": ("transaction {seq} of {process} ({txid}): the coordinator prepared to "
                                            "commit it, which its client never asked for"),
                           ".outcome": ("the client saw transaction {seq} of {process} ({txid}) commit, but the "
                                        "coordinator's log {what}")},
             reads_broker_logs=True),
    CheckDef("lost-offset-commit",
             "a transaction the client saw commit whose offset commit is not in the committed offsets log",
             (Requirement("history", None, f"{_NO_HISTORY}: nothing says which offsets each transaction committed"),
              Requirement("offsets-log", UNKNOWN, _NO_OFFSETS_LOG)),
             explanations={"": ("transaction {seq} of {process} committed, but its offset commit ({topic} "
                                "{commits}) is not in the group's committed offsets log")},
             reads_broker_logs=True),
    CheckDef("offsets-backwards",
             "a group's committed offset of an input partition that moved back in the offsets log",
             (Requirement("offsets-log", UNKNOWN, _NO_OFFSETS_LOG),),
             explanations={"": "the group's committed offset of {topic}/{p} moved back from {before} to {after}"},
             reads_broker_logs=True),
    CheckDef("stray-offset-commit",
             "a committed offset commit of the group that no transaction which may have committed sent: a "
             "transaction carried offsets it was not given",
             (Requirement("transactional", None, "not transactional: the consumer commits its own offsets (Kafka "
                                                 "Streams' at_least_once records none)"),
              Requirement("history", None, f"{_NO_HISTORY}: nothing says which offsets each transaction sent"),
              Requirement("offsets-log", UNKNOWN, _NO_OFFSETS_LOG)),
             explanations={"": ("the group committed {topic}/{p} at {o}, an offset no transaction of the history "
                                "sent"),
                           ".aborted": ("the group committed {topic}/{p} at {o}, an offset sent only by transactions "
                                        "their client saw abort ({senders}): another transaction carried it"),
                           ".outside": ("the group committed {topic}/{p} at {o} at {at:.3f} (harness clock), while "
                                        "no transaction that sent it and may have committed was sending it "
                                        "({senders}): another transaction carried it")},
             reads_broker_logs=True),
    CheckDef("lost-acknowledged-input",
             "an input the seeder's committed transaction wrote that the committed input log does not hold, at its "
             "position and with its id",
             (Requirement("seeder-evidence", None, "the seeder's history records no input it committed, and the run "
                                                   "holds no count of its own (final.json)"),),
             explanations={"": "input {in_id}, which the seeder's committed transaction wrote {where}, is {what}",
                           ".count": ("the seeder committed {n} inputs by its own count, but the committed log of "
                                      "{topic} holds {m}")}),
    CheckDef("input-mismatch",
             "a committed output whose input reference names a position holding another record, or none",
             (Requirement("full-lineage", None, "identity lineage: an output's input position is found from its id, "
                                                "so it cannot disagree with it"),),
             explanations={"": ("committed output {topic}-{partition}@{offset} was made from input {in_id} at "
                                "{p}@{o}, but the input log holds {found} there")}),
    CheckDef("invalid-txn-transition",
             "a __transaction_state step the coordinator's state machine forbids, an epoch going backwards or negative, "
             "a producer id change that is not KIP-890's rotation (from an exhausted epoch to a new id at epoch 0), or "
             "a producer id used again or by two transactional ids",
             (Requirement("transaction-log", UNKNOWN, _NO_TXN_LOG),),
             explanations={".state": ("{txid}: {from_status} -> {to_status} is not a transition the transaction "
                                      "coordinator's state machine allows"),
                           ".epoch": ("{txid}: producer epoch went backwards ({from_epoch} -> {to_epoch}) for "
                                      "producer id {pid}"),
                           ".negative-epoch": ("{txid}: producer id {pid} recorded with the negative epoch {epoch} "
                                               "({status}): an epoch bumped past 32767 wraps"),
                           ".rotation": ("{txid}: producer id {from_pid} (epoch {from_epoch}) -> {to_pid} (epoch "
                                         "{to_epoch}): the coordinator moves an id to a new producer id only from "
                                         "an exhausted epoch ({exhausted} or more), and to epoch 0"),
                           ".pid-reused": ("{txid}: producer id {pid} again, after the id had moved away from it "
                                           "(last from {from_pid})"),
                           ".pid-shared": "producer id {pid} is held by more than one transactional id: {txids}"},
             reads_broker_logs=True),
    CheckDef("hanging-transaction",
             "a partition whose last stable offset stayed behind its high watermark after heal and drain",
             (Requirement("liveness", UNKNOWN, "no liveness snapshot after heal in final.json"),)),
    CheckDef("zombie-write",
             "a committed output of a producer whose transactional.id a successor had already initialised",
             (Requirement("history", None, f"{_NO_HISTORY}: nothing says which producer initialised an id when"),),
             explanations={"": ("transaction {seq} of {process} ({txid}, epoch {epoch}) was committed after "
                                "{successor} had initialised the same transactional.id (epoch {successor_epoch}): "
                                "a fenced producer's write became visible")}),
    CheckDef("nonmonotonic",
             "within one output partition, outputs of one input partition out of input order",
             (Requirement("order-promised", None, "order is not promised under delivery={delivery} "
                                                  "(re-processing after a restart re-appends earlier inputs)"),),
             explanations={"": ("{topic}-{partition}: output of input {p}@{o} appears after an output of input "
                                "{p}@{earlier}")}),
    CheckDef("no-progress",
             "no committed transaction or no committed output: a run that proves nothing"),
    CheckDef("inconsistent-offsets",
             "an observer read a record at an offset that the final log holds with another record, or not at all",
             (_NEEDS_OBSERVATIONS,),
             explanations={".replaced": ("observer {observer} read {topic}-{partition}@{offset} (poll {poll}), but "
                                         "the final log holds another record at that offset"),
                           ".truncated": ("observer {observer} read {topic}-{partition}@{offset} (poll {poll}), "
                                          "but the final log holds no record at that offset: it was truncated "
                                          "after it was read")}),
    CheckDef("observed-aborted-read",
             "an observer read, during the run, a record of a transaction that aborted, or an output before its "
             "client asked to commit it, or an input before the seeder began its transaction",
             (_NEEDS_OBSERVATIONS,),
             explanations={"": ("observer {observer} read {topic}-{partition}@{offset} (poll {poll}) {isolation}, "
                                "a record the final log holds only in its uncommitted view: an aborted "
                                "transaction's"),
                           ".before-commit": ("observer {observer} read {topic}-{partition}@{offset} (poll "
                                              "{poll}), an output of transaction {seq} of {process}, {when}"),
                           ".before-seed": ("observer {observer} read {topic}-{partition}@{offset} (poll {poll}), "
                                            "an input of transaction {seq} of {process}, {when}")}),
    CheckDef("poll-skip",
             "an observer's successive reads of a partition skipped a committed record",
             (_NEEDS_OBSERVATIONS,),
             explanations={"": ("observer {observer} read {topic}-{partition}@{offset} (poll {poll}) right after "
                                "@{previous}, skipping {skipped} committed records from @{first_skipped}"),
                           ".start": ("observer {observer} began {topic}-{partition} at @{offset} (poll {poll}), "
                                      "skipping {skipped} committed records from @{first_skipped}")}),
    CheckDef("nonmonotonic-poll",
             "an observer's successive reads of a partition went back",
             (_NEEDS_OBSERVATIONS,),
             explanations={"": ("observer {observer} read {topic}-{partition}@{offset} (poll {poll}) after "
                                "@{previous}: its reads of the partition went back")}),
    CheckDef("unseen",
             "a committed record no observer read, though the observers reached the end of its partition",
             (_NEEDS_OBSERVATIONS, Requirement("observers-caught-up", None, "{observers_behind}")),
             explanations={"": ("{count} committed records of {topic}-{partition} (@{first} to @{last}) were read "
                                "by no observer, though every observer reached the end of the partition")}),
    # liveness: after the final heal, within the drain's bound (verifier/liveness.py)
    CheckDef("stalled-pipeline",
             "committed inputs the pipeline had not processed when the drain's bound after the final heal ran out",
             explanations={"": ("{what} of {topic}/{p} (offsets {first} to {last}) were never processed: "
                                "{progress}, through the drain's {bound:.0f} s after the final heal{claimed}{blocked}"
                                "{left}"),
                           ".blocked": "; {holders} held it, blocked in a client call that never returned ({calls})",
                           ".left-behind": ("; {process} aborted transaction {seq}, which held offset {first}, "
                                            "{ago:.0f} s before the drain's end, and read nothing of the partition "
                                            "after it, with no rebalance{reset}: its own recovery left the inputs "
                                            "behind (the client's; Kafka serves a consumer its partition's "
                                            "committed records)"),
                           ".reset-in-place": (", its recovery a reset of the offset to commit to {offset} that does "
                                               "not move the consumer"),
                           ".claimed-drained": ", though the drain's record says every input was processed",
                           ".stayed": "the group's committed offset there stayed at {offset}{still}",
                           ".moving": ("the group's committed offset there was still moving (last seen moving, to "
                                       "{offset}, {when}): too slow to catch up, not stuck"),
                           ".never": "the group never committed an offset there"}),
    CheckDef("hung-client-call",
             "a pipeline process stuck in a client call it invoked and never returned from, longer than the drain's "
             "bound, while the process ran to the drain",
             (Requirement("history", None, f"{_NO_HISTORY}: no client call is recorded"),),
             explanations={"": ("{process} ({client}) invoked {call}{txn} and it never returned in the {hung:.0f} s "
                                "the process lived after{ended} (the drain's bound: {bound:.0f} s): the "
                                "application's thread is stuck in its client{holds}"),
                           ".ended": ", to its exit ({meaning})",
                           ".holds": "; by its own account it still held input partitions {partitions}",
                           ".let-go": "; by its own account it held no input partition"}),
    CheckDef("unprocessed-assignment",
             "an input partition (a task's) with inputs left that the group coordinator assigns to a member that "
             "does not hold it, or to nobody, or that no running instance holds",
             explanations={".not-run": ("{topic}/{p}: the group coordinator assigns it to {member} ({group_state} "
                                        "group), but that instance holds {holds}{state}: nobody processes it"),
                           ".unassigned": ("{topic}/{p}: the group coordinator assigns it to no member of the "
                                           "{group_state} group ({members} members), so nobody processes it"),
                           ".unowned": ("{topic}/{p}: no running instance holds it at the drain's end "
                                        "({instances}), so nobody processes it")}),
    CheckDef("broker-not-rejoined",
             "a broker not registered (fenced or stopped) at the run's end, or a partition of the run's topics "
             "without a leader",
             explanations={"": ("broker {broker} was not registered {when}: fenced by the controller or stopped, "
                                "it leads and serves nothing"),
                           ".at-end": "at the run's end ({when}), though the final heal found every broker",
                           ".heal-gave-up": "when the final heal gave up waiting for it",
                           ".leaderless": "{partition} had no leader at the run's end ({when})"}),
)
#: the share-group delivery ledger's checks (verifier/share_checks.py), answered by the ledger alone
#: in a share-group run, after the ledger's own ``duplicate``
LEDGER_CHECKS: tuple[CheckDef, ...] = (
    CheckDef("share-lost", "a record the group considers done (acknowledged or archived) without its outputs "
                           "committed, unless it was poison and rejected", share_ledger=True),
    CheckDef("share-redelivered-after-accept", "a record delivered again (a higher delivery count) after the "
                                               "delivery whose ACCEPT was committed", share_ledger=True),
    CheckDef("share-delivery-limit", "a record delivered more times than the delivery count limit", share_ledger=True),
    CheckDef("share-stuck-acquired", "after the drain (and past the lock duration) a record that is neither "
                                     "acknowledged for good nor archived", share_ledger=True),
    CheckDef("share-state-regressed", "a write to __share_group_state that undoes what an earlier one made final: a "
                                      "record acknowledged or archived made deliverable again, the start offset "
                                      "moved back, or a write from a share-partition leader older than one already "
                                      "written (the coordinator fences those)", share_ledger=True,
             reads_broker_logs=True),
    CheckDef("share-ack-not-persisted", "an ACCEPT or REJECT the broker answered without error that the persisted "
                                        "state does not hold: the record is neither below the start offset nor "
                                        "acknowledged or archived there", share_ledger=True, reads_broker_logs=True),
)
#: every anomaly kchaos can report
REGISTRY = CHECKS + LEDGER_CHECKS
#: One template per kind of case; ``explain(kind, **fields)`` fills it. Both engines call it
#: with the same fields, so a case reads the same whichever engine found it.
EXPLANATIONS = {f"{c.anomaly}{kind}": text for c in REGISTRY for kind, text in c.explanations.items()}

F = TypeVar("F", bound=Callable[..., CheckResult])
#: engine ("python", "spark"; "ledger": the share ledger) -> anomaly -> the function that answers it
_IMPLEMENTATIONS: dict[str, dict[str, Callable[[Any], CheckResult]]] = {}


def implements(anomaly: str, *engines: str) -> Callable[[F], F]:
    """Register the decorated function as ``anomaly``'s query in ``engines``. Its name must be
    ``check_<query>`` (one spelling per check); an anomaly the registry does not know fails at import."""
    check = next((c for c in REGISTRY if c.anomaly == anomaly), None)
    if check is None:
        raise ValueError(f"{anomaly!r} is not a registered check (verifier/checks.py)")

    def register(function: F) -> F:
        if function.__name__ != f"check_{check.query.__name__}":
            raise ValueError(f"{function.__module__}.{function.__name__} answers {anomaly}: name it "
                             f"check_{check.query.__name__}")
        for engine in engines:
            _IMPLEMENTATIONS.setdefault(engine, {})[anomaly] = function
        return function

    return register


def implementation(check: CheckDef, engine: str) -> Callable[[Any], CheckResult] | None:
    """The function ``engine`` registered for ``check``, if its module is imported and has one."""
    return _IMPLEMENTATIONS.get(engine, {}).get(check.anomaly)


def engine_queries(engine: str) -> dict[str, staticmethod]:
    """An engine class's body: each check's registered function as a static method named after its query."""
    return {c.query.__name__: staticmethod(f) for c in CHECKS if (f := implementation(c, engine)) is not None}


#: the read-side checks (observers): what readers got during the run, not only the end state
OBSERVATION_CHECKS = tuple(c.anomaly for c in CHECKS if _NEEDS_OBSERVATIONS in c.requires)

CHECK_NAMES = tuple(c.anomaly for c in CHECKS)
assert set(LIVENESS_CHECKS) <= set(CHECK_NAMES), "every liveness check is registered"
#: the checks that need the client history (without one they would speak for an external app)
HISTORY_CHECKS = tuple(c.anomaly for c in CHECKS if any(r.needs == "history" for r in c.requires))
#: the checks that read the coordinator's log, the offsets log, and neither (the user topics)
_TXN_LOG_CHECKS = ("invalid-txn-transition", "split-transaction")
_OFFSETS_LOG_CHECKS = ("lost-offset-commit", "offsets-backwards", "stray-offset-commit")
#: the checks that read what no client of the pipeline sees: the brokers' own logs (the
#: coordinator's and the offsets log). The observers' checks read what readers got during the
#: run. Every other check judges the end state: the committed topics, the group's committed
#: offsets and the last stable offsets, against the clients' history (bench/time_to_bug.py
#: counts detections by these three).
#: (The share ledger's state checks read the share coordinator's log, __share_group_state.)
WHITE_BOX_CHECKS = (*_TXN_LOG_CHECKS, *_OFFSETS_LOG_CHECKS, *(c.anomaly for c in LEDGER_CHECKS if c.reads_broker_logs))
assert set(WHITE_BOX_CHECKS) == {c.anomaly for c in REGISTRY if c.reads_broker_logs}


def detection_kind(anomaly_types: list[str] | tuple[str, ...]) -> str | None:
    """How a run saw its anomalies: ``end-state`` when any is an end-state check's, else
    ``read-side`` (observers) or ``white-box``; None with none."""
    kinds = set(anomaly_types)
    if not kinds:
        return None
    if kinds - set(WHITE_BOX_CHECKS) - set(OBSERVATION_CHECKS):
        return "end-state"
    return "read-side" if kinds & set(OBSERVATION_CHECKS) else "white-box"


CHECK_GROUPS = evidence.CheckGroups(
    history=HISTORY_CHECKS, transaction_log=_TXN_LOG_CHECKS, offsets_log=_OFFSETS_LOG_CHECKS,
    user_topics=tuple(n for n in CHECK_NAMES if n not in (*_TXN_LOG_CHECKS, *_OFFSETS_LOG_CHECKS, *LIVENESS_CHECKS)),
    observations=OBSERVATION_CHECKS)

#: What a share-group run does not check (its share ledger, verifier/share_checks.py, does instead)
NOT_FOR_SHARE = {
    "lost-input": "a share group has no committed offsets: covered by share-lost and share-stuck-acquired",
    "offsets-ahead": "a share group has no committed offsets",
    "offsets-behind": "a share group has no committed offsets",
    "nonmonotonic": "share groups do not promise order",
    "lost-offset-commit": "a share group commits no consumer offsets (acknowledgements instead: the share ledger)",
    "offsets-backwards": "a share group has no committed offsets",
    "stray-offset-commit": "a share group commits no consumer offsets",
    "stalled-pipeline": "a share group has no committed offsets: its drain waits for every input's acknowledgement "
                        "(share-lost, share-stuck-acquired)",
    "unprocessed-assignment": "a share group assigns no partitions to one member",
}

#: What a ``workload.kind = "txn"`` run (workloads/txn.py: transactions that send to and poll
#: shared partitions, no inputs, no outputs, no group) does not check, by check: the registry's
#: checks read the consume-transform-produce pipeline's lineage, group and observers. Its own check
#: is the isolation cycles (verifier/isolation/judge.py, ``TXN_ISOLATION_CHECK``), made by the
#: Python engine only. Those that could apply to it read the run through the verifier's run data,
#: which is built from the pipeline's topics: each says it is not wired yet.
_TXN_REASONS = {
    "lineage": "kind txn writes no inputs, and no outputs carrying the lineage contract: nothing for this check",
    "offsets": "kind txn commits no consumer offsets (its consumers are assigned, no group)",
    "observers": "kind txn has no observers (refused on load): its workers' polls are its reads",
    "group": "kind txn has no input to process and no consumer group to assign it",
    "not-wired": ("it could apply to kind txn, but the verifier's run data is built from the consume-transform-"
                  "produce topics: not wired for this kind yet"),
}
_TXN_GROUP = {
    **{name: "offsets" for name in _OFFSETS_LOG_CHECKS}, **{name: "observers" for name in OBSERVATION_CHECKS},
    "stalled-pipeline": "group", "unprocessed-assignment": "group",
    **{name: "not-wired" for name in ("invalid-txn-transition", "split-transaction", "no-progress",
                                       "hung-client-call", "broker-not-rejoined", "hanging-transaction")},
}
#: the isolation-cycle check's name in a txn run's results (its only required check)
TXN_ISOLATION_CHECK = "isolation-cycles"
NOT_FOR_TXN = {name: _TXN_REASONS[_TXN_GROUP.get(name, "lineage")] for name in CHECK_NAMES}

#: What identity lineage (an unmodified app: outputs carry only their input's id) cannot check,
#: beside what its lack of client history already rules out (lost-write, zombie-write).
IDENTITY_NOT_CHECKED = {
    "torn-transaction (per transaction)": "identity lineage: an output does not name the transaction that wrote it, "
                                          "so only the per-input half (all K outputs or none) is checked",
    "aborted-read (client-aborted transaction)": "identity lineage: no transaction named; outputs of aborted input "
                                                 "copies (the seeder's marked ids) are checked",
}


def has(data: Any, needs: str) -> bool:
    """Whether the run (an engine's run object: ``workload``, ``final``, ``history``, ``txn_log``,
    ``offset_log``, ``acknowledged``) has what a requirement names."""
    delivery = data.workload.delivery
    if needs == "history":
        return bool(data.history.has_history)
    if needs == "transactional":
        return delivery == "exactly-once"
    if needs == "transaction-log":
        return data.txn_log is not None
    if needs == "liveness":
        return data.final.get("liveness") is not None
    if needs == "order-promised":
        return delivery in ORDER_PROMISED_DELIVERY
    if needs == "offsets-log":
        return data.offset_log is not None
    if needs == "seeder-evidence":  # its acknowledgements, or at least its own count to hold the log against
        return data.acknowledged.any or (data.final.get("seeder") or {}).get("committed") is not None
    if needs == "client-commits":
        return any(o == "committed" for o in data.history.txn_outcome.values())
    if needs == "full-lineage":
        return data.workload.lineage == "full"
    if needs == "observations":
        return data.observer_summary is not None
    if needs == "observers-caught-up":
        return observers_behind(data.observer_summary) is None
    raise ValueError(f"unknown requirement {needs!r}")


#: requirements the run's configuration decides: unmet, the workload does not claim the
#: guarantee (an at-least-once pipeline promises no order); every other requirement is evidence
#: the run may lack
def _configured(campaign: Any, needs: str) -> bool | None:
    workload = campaign.workload
    return {"transactional": workload.delivery == "exactly-once",
            "order-promised": workload.delivery in ORDER_PROMISED_DELIVERY,
            "full-lineage": workload.lineage == "full",
            "history": evidence.records_history(workload),
            "observations": campaign.observers.count > 0}.get(needs)


def claimed_checks(campaign: Any) -> tuple[str, ...]:
    """The checks a run's workload claims, in registry order: every check whose configuration
    requirements its workload meets (a share group claims no consumer-offset check, an external
    app without a history no check that reads one, identity lineage no input-mismatch), with the
    campaign's ``[verifier] require`` added and ``waive`` taken away. A claimed check that ends
    ``not_checked`` makes the verdict ``unknown``: what was not observed is never valid."""
    share = campaign.workload.kind == "share"
    out = []
    for check in CHECKS:
        name = check.anomaly
        if share and (name in NOT_FOR_SHARE or check.share_ledger):
            continue
        if all(_configured(campaign, r.needs) is not False for r in check.requires):
            out.append(name)
    wanted = (set(out) | set(campaign.verifier.require)) - set(campaign.verifier.waive)
    return tuple(n for n in CHECK_NAMES if n in wanted)


def observers_behind(summary: dict[str, Any] | None) -> str | None:
    """Why the observers' reads cannot say what nobody read (some did not reach the end), or None."""
    behind = [o for o in (summary or {}).get("observers") or [] if o.get("caught_up") is not True]
    if not behind:
        return None
    return "; ".join(f"observer {o['observer']} did not reach the end of the topics"
                     + (f" ({o['error']})" if o.get("error") else "") for o in behind)


def _requirement_note(data: Any, requirement: Requirement) -> str:
    return requirement.note.format(delivery=data.workload.delivery,
                                   observers_behind=observers_behind(getattr(data, "observer_summary", None)))


def run_checks(results: Any, data: Any, engine: Any, pool: Any = None) -> bool:
    """Run every registered check on ``data`` into ``results`` with ``engine``'s queries: a check
    whose requirement the run does not meet says so as the registry defines; one that does not
    apply goes to ``not_checked`` with its reason; a crash is ``unknown`` with the traceback. For a
    share-group run the consumer-group-only checks (and ``duplicate``, which the share ledger
    replaces) are skipped. Returns whether it is a share-group run.

    With ``pool`` (a ``concurrent.futures`` executor) the checks run concurrently, and their
    results are still recorded in registry order: an engine whose queries mostly wait (Spark's
    driver planning one job while the executors run another) gains; its shared intermediate
    results must then be built once under a lock."""
    import traceback

    share = data.workload.kind == "share"
    if share:
        results.not_checked.update(NOT_FOR_SHARE)
    if data.workload.lineage == "id":
        results.not_checked.update(IDENTITY_NOT_CHECKED)

    def run_one(check: CheckDef) -> Any:
        try:
            return check.query(engine, data)
        except NotApplicable as reason:
            return reason
        except Exception:
            return CheckResult(check.anomaly, UNKNOWN, note="checker crashed: " + traceback.format_exc(limit=3))

    # what the run lacks: the checks it blinds say why; a fatal gap is an error (never valid)
    blinded: dict[str, str] = {}
    for gap in evidence.gaps(data, CHECK_GROUPS):
        if gap.fatal:
            results.errors.append(gap.reason)
        for name in gap.checks:
            blinded.setdefault(name, gap.reason)

    # (check, its outcome or None to run it), in registry order, which the results keep
    planned: list[tuple[CheckDef, Any]] = []
    for check in CHECKS:
        name = check.anomaly
        if share and (name in NOT_FOR_SHARE or check.share_ledger):
            continue
        if name in blinded:
            planned.append((check, NotApplicable(blinded[name])))
            continue
        unmet = next((r for r in check.requires if not has(data, r.needs)), None)
        if unmet is None:
            planned.append((check, None))
            continue
        note = _requirement_note(data, unmet)
        planned.append((check, NotApplicable(note) if unmet.verdict is None else CheckResult(name, unmet.verdict, note=note)))
    runnable = [check for check, outcome in planned if outcome is None]
    ran = iter(pool.map(run_one, runnable) if pool is not None else map(run_one, runnable))
    for check, outcome in planned:
        outcome = next(ran) if outcome is None else outcome
        if isinstance(outcome, NotApplicable):
            results.not_checked[check.anomaly] = str(outcome)
        else:
            results.checks.append(outcome)
    # a failed observer's reads are judged up to its failure, and the read-side checks say so
    failed = evidence.failed_observers(getattr(data, "observer_summary", None))
    for outcome in results.checks:
        if failed and outcome.name in OBSERVATION_CHECKS and outcome.verdict != UNKNOWN:
            outcome.note = (f"{outcome.note}; " if outcome.note else "") + NOTES["observer-window"].format(failed=failed)
    results.required = list(claimed_checks(data.campaign))
    return share


def result(name: str, cases: list[dict[str, Any]], total: int | None = None, note: str | None = None) -> CheckResult:
    """A query's result: invalid with at most MAX_CASES cases when it found any (the note carries
    the exact count), valid otherwise. When ``cases`` holds every case (both engines build them
    all up to DIGEST_MAX_CASES), the digest of their explanations lets the cross-check compare
    every case, not only the ones kept."""
    total = len(cases) if total is None else total
    every = bool(cases) and len(cases) == total
    return CheckResult(name, INVALID if total else VALID, cases[:MAX_CASES],
                       note=note or (NOTES["cases"].format(n=total) if total else None),
                       digest=case_digest(cases) if every else None, total=total,
                       places=[case_place(c) for c in cases] if every and total > MAX_CASES else None)


def case_digest(cases: list[dict[str, Any]]) -> str:
    """The cases' explanations, sorted, hashed: equal for two engines that found the same cases
    (one explanation template per kind of case, filled with the case's identifying fields)."""
    import hashlib

    return hashlib.sha256("\n".join(sorted(str(c["explanation"]) for c in cases)).encode()).hexdigest()[:24]


def split_result(cases: list[dict[str, Any]], facts: dict[str, Any]) -> CheckResult:
    """split-transaction from coordinator_log.judge: unknown when nothing could be matched."""
    if facts.get("matched_nothing") and not cases:
        return CheckResult("split-transaction", UNKNOWN, note=NOTES["split-transaction.matched-nothing"])
    return result("split-transaction", cases)


def set_aside_note(parts: list[str]) -> str:
    """What a check set aside (each part an explained count), as the tail of its note; "" for none."""
    return NOTES["set-aside"].format(why="; ".join(parts)) if parts else ""


def offset_commit_result(cases: list[dict[str, Any]], checked: int, committed: int,
                         set_aside: list[str] | None = None, unplaced: str | None = None) -> CheckResult:
    """lost-offset-commit from offsets_log: unknown when the client recorded no offsets to look
    for; ``set_aside``: the explained counts of commits it could not judge, said in its note;
    ``unplaced``: commits nothing could place (past a pinned view whose raw view was not read),
    which leave it unknown unless it found a case."""
    if committed and not checked:
        return CheckResult("lost-offset-commit", UNKNOWN, note=NOTES["lost-offset-commit.recorded-nothing"].format(
            n=committed))
    found = result("lost-offset-commit", cases)
    tail = set_aside_note(set_aside or [])
    if tail:
        found.note = (found.note or f"{checked} committed transactions' offset commits judged") + tail
    if unplaced:
        found.note = (found.note or f"{checked} committed transactions' offset commits judged") + "; " + unplaced
        if found.verdict == VALID:
            found.verdict = UNKNOWN
    return found


def progress_result(committed: int, outputs: int, from_log: bool = False) -> CheckResult:
    """no-progress from the two counts (the engines count them their own way). ``committed``
    comes from the client history, or, for a pipeline that records none (an external app), from
    the coordinator's log (``from_log``: model.coordinator_commits)."""
    where = NOTES["no-progress.from-log"] if from_log else ""
    if not outputs or committed == 0:
        return CheckResult("no-progress", UNKNOWN, note=NOTES["no-progress.vacuous"].format(committed=committed,
                                                                                           outputs=outputs) + where)
    return CheckResult("no-progress", VALID, note=NOTES["no-progress.ok"].format(committed=committed) + where)


def case_keys(results: dict[str, Any]) -> dict[str, list[str]]:
    """Per anomaly, the sorted explanations of its cases (results.json form). Explanations come
    from one template per kind filled with the case's identifying fields, so two engines that
    found the same cases have equal keys."""
    return {name: sorted(c["explanation"] for c in cases) for name, cases in (results.get("anomalies") or {}).items()}
