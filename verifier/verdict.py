"""A run's verdict, decided and written in one place.

:func:`judge_run` is the one entry point from a stored run directory to an exit code: it checks
the run (verifier/verify.py), computes its metrics, certifies it when it has planned steps
(verifier/certify.py), writes ``results.json``, ``certification.json`` and the final
``status.json``, and returns the exit code (0 valid / pass, 1 invalid / fail, 2 unknown).
``kchaos run`` calls it while the cluster is still up (the Spark job then reads the topics
through Kafka); ``kchaos analyze`` calls it on a stored run. Nothing else writes a verdict.
"""

from __future__ import annotations

from typing import Any, Callable

from pydantic import ValidationError

from kchaos.clusters.spec import describe_validation_error
from kchaos.errors import VERDICT_EXIT, ConfigError
from kchaos.rundir import RunDir
from kchaos.verifier.campaign import Campaign
from kchaos.verifier.certify import certify
from kchaos.verifier.spec import VerifierSpec
from kchaos.verifier.verify import verify_run, write_results
from kchaos.workloads.history import pair_operations, read_lines
from kchaos.workloads.metrics import compute_metrics

CERTIFICATION_FILE = "certification.json"


def _quiet(message: str) -> None:
    pass


def verifier_spec(campaign: Campaign, overrides: dict[str, Any] | None) -> VerifierSpec:
    """The campaign's ``[verifier]`` table with ``overrides`` (``kchaos analyze --engine ...``)
    applied for this check only; ConfigError when they do not validate."""
    if not overrides:
        return campaign.verifier
    try:
        return VerifierSpec.model_validate({**campaign.verifier.model_dump(), **overrides})
    except ValidationError as exc:
        raise ConfigError(f"bad verifier settings: {describe_validation_error(exc, 'verifier')}") from None


def judge_run(run: RunDir, campaign: Campaign, bootstrap: str | None = None,
              overrides: dict[str, Any] | None = None, say: Callable[[str], None] = _quiet) -> int:
    """Check a run directory, certify it when it has steps, write the results and the final
    status; return the exit code. ``bootstrap``: a live cluster the Spark job reads the topics
    from; ``say``: where progress and the verdict lines go (the harness prints them)."""
    spec = verifier_spec(campaign, overrides)
    stopped_in = (run.read_json("status.json") if (run.path / "status.json").exists() else {}).get("phase")
    run.set_status("verify")
    ops = None
    if (run.path / "history.jsonl").exists():
        ops = pair_operations(list(read_lines(run.path / "history.jsonl")))  # read once, for every reader
        run.write_json("metrics.json", compute_metrics(ops))
    results = write_results(run.path, verify_run(run.path, spec, bootstrap, ops, stopped_in, say))
    code = VERDICT_EXIT[results["verdict"]]
    facts = results.get("facts", {})
    say(f"verdict: {results['verdict'].upper()}"
        + (f" ({', '.join(results['anomaly_types'])})" if results["anomaly_types"] else "")
        + f"; inputs {facts.get('inputs_committed')}, committed outputs {facts.get('outputs_committed')}, "
          f"transactions {facts.get('transactions')}")
    for name, reason in results.get("not_checked", {}).items():
        say(f"not checked: {name} ({reason})")
    status: dict[str, Any] = {"verdict": results["verdict"]}
    if campaign.steps:
        cert = certify(run.path, campaign, results, ops)
        run.write_json(CERTIFICATION_FILE, cert)
        code, status["certification"] = cert["exit_code"], cert["overall"]
        say(f"certification: {cert['overall'].upper()} ({cert['committed_transactions']} committed transactions over "
            f"{len(cert['phases'])} phases, clients {', '.join(cert['clients'])})")
        for row in cert["rows"]:
            say(f"  {row['verdict']:8} {row['client']:9} {row['phase']}: {row['committed_transactions']} committed"
                + (f", {row['case_count']} anomaly cases" if row["case_count"] else "")
                + (f", transaction log client TV {row['client_transaction_versions']}"
                   if row["client_transaction_versions"] else ""))
        for reason in cert["reasons"]:
            say(f"  why not pass: {reason}")
    run.set_status("done", complete=True, exit_code=code, **status)
    return code
