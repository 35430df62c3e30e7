"""``kchaos plan`` and ``kchaos list``: what a campaign would do, and what kchaos offers, without
starting anything (no cluster, no JVM: seconds)."""

from __future__ import annotations

import importlib.metadata
import json
from typing import Any

from kchaos.clusters import backend_capabilities
from kchaos.clusters.spec import FORMAT_FEATURES
from kchaos.faults.base import TARGETS
from kchaos.faults.kinds import KINDS
from kchaos.faults.scheduled import ScheduledFault
from kchaos.harness.campaign import CAMPAIGNS_DIR, read_campaign_file, shipped_campaigns
from kchaos.reports.what_ran import workers_client, workload_line
from kchaos.verifier.campaign import Campaign
from kchaos.workloads.spec import WorkloadSpec
from kchaos.workloads.epoch_ageing import staggered_targets

#: rough phase costs on the reference machine (2 cores; docs/benchmarks.md): cluster start, the
#: heal and health wait, the final reads (liveness wait and dumps), the Spark verification
#: (the default campaign, seed 7, 2026-11-28: setup 12 s, heal 4 s, final reads 15 s, Spark 35 s); the
#: drain's backlog after faults on their schedule (the default run of 2026-11-22, seed 11: 84 s), or
#: after faults paced by the work, which start only on a pipeline that has caught up (2 s)
SETUP_S, HEAL_S, FINAL_READS_S, VERIFY_S, DRAIN_BACKLOG_S, DRAIN_BACKLOG_PACED_S = 15, 10, 30, 45, 75.0, 15.0
#: InitProducerId per second when ageing transactional ids (three at once; docs/workload.md)
AGEING_RATE = 938.0
#: the confluent-kafka installed, which kchaos' own confluent workers would use
CONFLUENT = f"confluent-kafka {importlib.metadata.version('confluent-kafka')}"


def ageing_s(campaign: Campaign) -> float:
    """Seconds the epoch ageing takes before the workers start (0 without it)."""
    wl = campaign.workload
    if wl.epochs_before_rollover is None:
        return 0.0
    return sum(staggered_targets(len(wl.transactional_ids("x")), wl.epochs_before_rollover)) / AGEING_RATE


def estimate(campaign: Campaign, schedule: list[ScheduledFault]) -> dict[str, float]:
    """Seconds per phase: the workload runs ``run.duration_s`` (longer while scheduled faults are
    still to run); the drain takes what seeding has left after it, plus the backlog faults leave
    (DRAIN_BACKLOG_S, or DRAIN_BACKLOG_PACED_S for faults paced by the work), at most the drain bound."""
    faults_end = max((f.at_s + f.hold_s for f in schedule), default=0.0)
    workload = max(campaign.run.duration_s, faults_end)
    # unset records: inputs arrive for the whole workload phase, and stop with it
    seeding = workload if campaign.workload.records is None else campaign.workload.records / campaign.workload.rate
    txn = campaign.workload.kind == "txn"  # no inputs: its drain returns at once; its check is the Python engine's
    paced = campaign.faults.pacing.mode == "recovery"
    backlog = (DRAIN_BACKLOG_PACED_S if paced else DRAIN_BACKLOG_S) if schedule else 10.0
    drain = 0.0 if txn else min(max(seeding - workload, 0.0) + backlog, campaign.workload.drain_timeout_s)
    steps = sum(1 for _ in campaign.steps) * 30.0
    setup = SETUP_S + round(ageing_s(campaign))
    return {"setup": setup, "workload": workload + steps, "heal": HEAL_S if schedule else 0.0, "drain": drain,
            "final_reads": FINAL_READS_S,
            "verify": ((60.0 if campaign.verifier.engine == "spark" else 5.0) if txn  # txn: the reference, then Spark's
                       else VERIFY_S if campaign.verifier.engine == "spark" else 15.0),
            "at_most": setup + 2 * workload + steps + HEAL_S + campaign.workload.drain_timeout_s + FINAL_READS_S
            + VERIFY_S}


def plan(campaign: Campaign, seed: int, fresh: bool, schedule: list[ScheduledFault]) -> dict[str, Any]:
    phases = estimate(campaign, schedule)
    return {"campaign": campaign.model_dump(mode="json"), "seed": seed, "fresh_seed": fresh,
            "schedule": [f.to_json() for f in schedule],
            "estimate_s": {k: round(v) for k, v in phases.items()},
            "capabilities": sorted(c.value for c in backend_capabilities(campaign.cluster))}


def cluster_line(cl: dict[str, Any]) -> str:
    """The plan's cluster line. A cluster kchaos did not start is never formatted: a level the
    campaign names is checked against it at start (a run that finds another stops, exit 3), and
    its size, release and levels are otherwise its own."""
    tv = cl["transaction_version"]
    if cl["backend"] == "external":
        ext = cl.get("external") or {}
        levels = ", ".join(f"{name} {cl[key]}" for key, name in FORMAT_FEATURES.items() if cl.get(key) is not None)
        return (f"cluster   external at {ext.get('bootstrap_servers')}, admin tools of Kafka {cl['kafka_version']}; "
                + (f"{levels} required (checked against the cluster at start, never set)" if levels else
                   "its own transaction.version (not checked: cluster.transaction_version names one to require)"))
    return (f"cluster   Kafka {cl['kafka_version']}, {cl['nodes']} nodes, {cl['backend']} backend, transaction.version "
            f"{tv if tv is not None else 'release default'}")


def render_plan(p: dict[str, Any]) -> str:
    c = p["campaign"]
    cl, wl, fa, ve = c["cluster"], c["workload"], c["faults"], c["verifier"]
    workload = WorkloadSpec.model_validate(wl)
    est = p["estimate_s"]
    total = sum(v for k, v in est.items() if k != "at_most")
    lines = [f"campaign  {c['name']}: {c['description']}".rstrip(": "),
             f"seed      {p['seed']}" + (" (fresh: pass --seed to plan and run this one)" if p["fresh_seed"] else ""),
             cluster_line(cl),
             f"workload  {workload_line(workload)}"
             + ("" if workload.kind == "txn" else  # no inputs: its line says its transactions
                (f" (about {round(wl['rate'] * est['workload'])} inputs)" if wl["records"] is None else "") + (
                 f"; at most {wl['max_batch']} inputs per transaction, {wl['abort_fraction']:.0%} aborted on purpose"
                 if workload.own_workers else "")),
             f"client    {workers_client(workload, CONFLUENT)}",
             *[f"          {'' if wl['client'] != 'fleet' else slot.label + ' (' + ', '.join(slots) + '): '}without "
               f"{name}: {why}" for slot, slots, missing in workload.not_honoured_by_client()
               for name, why in sorted(missing.items())],
             *([f"ageing    the workers' transactional ids before they start, to {wl['epochs_before_rollover']} bumps "
                "before their producer ids must rotate (the next id twice as many, and so on)"]
               if wl.get("epochs_before_rollover") is not None else []),
             f"run       {c['run']['duration_s']:g}s of workload; drain up to {wl['drain_timeout_s']:g}s",
             f"observers {c['observers']['count']}" + (f" ({c['observers']['isolation']}, reading every user topic "
                                                        "throughout)" if c["observers"]["count"] else
                                                        " (the read-side checks are not made)"),
             ("verifier  the isolation-cycle check (Elle's classes at read_committed) with no-progress and "
              "hanging-transaction, by the Python reference, computed again by Spark and compared" if workload.kind == "txn" else
              f"verifier  {ve['engine']}" + (" with the Python cross-check" if ve["engine"] == "spark" and ve["cross_check"]
                                             else "")),
             ""]
    if c["steps"]:
        lines.append("steps")
        lines += [f"  {s['at_s']:>7.1f}s  {s['action']}: " + (f"{s['feature']} -> {s['level']}" if s["action"] == "feature"
                                                            else f"rolling upgrade to {s['version']}")
                  + (f", under {s['fault']['kind']} {s['fault'].get('target') or ''} held "
                     f"{s['fault'].get('duration_s') or 10:g}s from just before the change" if s.get("fault") else "")
                  for s in c["steps"]]
        if cl["backend"] == "external":
            lines.append("  each change journaled with the level before; the run puts the first level back at its "
                         "end (unless its last step did), `kchaos heal RUN_DIR` after a crash")
        lines.append("")
    if p["schedule"]:
        lines.append(f"faults    {len(p['schedule'])} scheduled ({fa['order']} order"
                     + (f", packages {', '.join(fa['packages'])}" if fa["packages"] else "") + "):")
        pacing, exposure = fa["pacing"], fa["exposure"]
        if pacing["mode"] == "recovery":
            lines.append(f"  paced by the work: each fault also waits (at most {pacing['max_wait_s']:g}s) until the "
                         f"pipeline commits at {pacing['recovery_share']:.0%} of its rate before the first fault; "
                         "later faults slide by what it waited"
                         + (f"; coordinator kills wait (at most {pacing['aim_wait_s']:g}s) for a commit or offset "
                            "commit under way and take its coordinator" if pacing["aim"] else ""))
        if exposure["committed"] or exposure["share"] is not None:
            lines.append("  required exposure (else the verdict is unknown): committed transactions overlapping each "
                         "kind's windows: " + ", ".join(f"{k} {n}" for k, n in sorted(exposure["committed"].items()))
                         + (f"; {exposure['share']:.0%} of all committed transactions under one of them"
                            if exposure["share"] is not None else ""))
        elif exposure.get("floor"):
            lines.append(f"  required exposure: none declared, so the floor (else the verdict is unknown): "
                         f"{exposure['floor']:g} committed transaction per fault of each kind under its windows")
        else:
            lines.append("  required exposure: none, and the floor lowered to 0 by the campaign")
        if fa.get("per_phase") and c["steps"]:
            lines.append("  planned per phase: from each step's time the order starts over at its first entry; a "
                         "phase's faults start once its step is done and are dropped if the next step begins first")
        lines.append(f"  {'at':>8}  {'hold':>6}  {'kind':<22} {'target':<26} parameters")
        phase = None
        for f in p["schedule"]:
            if f.get("phase") is not None and f["phase"] != phase and phase is not None:
                lines.append(f"  {'':>8}  -- after step {f['phase'] - 1} begins --")
            phase = f.get("phase")
            params = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in f["params"].items())
            lines.append(f"  {f['at_s']:>7.1f}s {f['hold_s']:>6.1f}s  {f['kind']:<22} {f['target']:<26} {params}")
    else:
        lines.append("faults    none (faults.enabled = false)")
    lines += ["", f"estimate  about {total / 60:.0f} min (setup {est['setup']}s, workload {est['workload']}s, heal "
                  f"{est['heal']}s, drain ~{est['drain']}s, final reads ~{est['final_reads']}s, verification "
                  f"~{est['verify']}s); at most ~{est['at_most'] / 60:.0f} min with every bound reached"]
    return "\n".join(lines)


def listing(what: str) -> list[dict[str, Any]]:
    if what == "campaigns":
        out = []
        for name in shipped_campaigns():
            data = read_campaign_file(CAMPAIGNS_DIR / f"{name}.toml")
            out.append({"name": name, "description": data.get("description", "")})
        return out
    if what == "faults":
        return [{"kind": k.name, "capability": k.capability.value if k.capability else "workload",
                 "targets": list(k.targets), "summary": k.summary,
                 "parameters": {n: f.get_default(call_default_factory=True) for n, f in k.params.model_fields.items()}}
                for k in sorted(KINDS.values(), key=lambda k: k.name)]
    return [{"target": t, "meaning": TARGETS.get(t, ""), "kinds": sorted(k.name for k in KINDS.values() if t in k.targets)}
            for t in sorted({t for k in KINDS.values() for t in k.targets})]


def render_listing(what: str, rows: list[dict[str, Any]]) -> str:
    if what == "campaigns":
        width = max(len(r["name"]) for r in rows)
        return "\n".join(f"{r['name']:<{width}}  {r['description']}" for r in rows)
    if what == "faults":
        out = []
        for r in rows:
            params = ", ".join(f"{n}={v}" for n, v in r["parameters"].items()) or "no parameters"
            out.append(f"{r['kind']:<22} {r['summary']}\n{'':<22} needs: {r['capability']}; parameters: {params}\n"
                       f"{'':<22} targets: {', '.join(r['targets'])}")
        return "\n".join(out)
    width = max(len(r["target"]) for r in rows)
    return "\n".join(f"{r['target']:<{width}}  {r['meaning']}  (kinds: {', '.join(r['kinds'])})" for r in rows)


def as_json(data: Any) -> str:
    return json.dumps(data, indent=2, default=str)
