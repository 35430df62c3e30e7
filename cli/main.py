"""The ``kchaos`` command line.

Exit codes: 0 ok/valid, 1 invalid, 2 unknown, 3 harness error (bad input, missing tools,
a cluster that would not start). Errors print one line naming the cause and the fix.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any, NoReturn

from kchaos import kchaos_version, log, signals
from kchaos.clusters.docker.engine import PrivateDockerEngine, install_engine
from kchaos.clusters.docker.image import ensure_kafka_image
from kchaos.clusters.external import heal_run
from kchaos.clusters.local import LocalJvmCluster
from kchaos.clusters.proxy.toxiproxy import ensure_toxiproxy_binary
from kchaos.clusters.spec import ClusterSpec, apply_overrides
from kchaos.log import say
from kchaos.runtime import faketime
from kchaos.runtime.artifacts import require_java, resolve_kafka, validate_kafka_version
from kchaos.runtime.heal_journal import JOURNAL_NAME, HealJournal, where
from kchaos.runtime.processes import live_processes, reap
from kchaos.signals import GRACE_S
from kchaos.ci.lint import ensure_actionlint
from kchaos.ci.merge import merge_nights
from kchaos.ci.needs import is_root
from kchaos.ci.nightly import DEFAULT_MATRIX, resolve_night, run_nightly
from kchaos.ci.shards import ShardSpec, check_night_id, default_night_id, plan_night, render_plan_night
from kchaos.errors import EXIT_HARNESS_ERROR, ClusterError, ConfigError, KchaosError
from kchaos.cli.plan import as_json, listing, plan, render_listing, render_plan
from kchaos.harness.campaign import load_campaign, planned_schedule, resolve_campaign_path
from kchaos.harness.prune import apply_prune, plan_prune
from kchaos.harness import findings
from kchaos.harness.run import render_report, replay_run
from kchaos.harness.runs import run_count
from kchaos.paths import state_dir
from kchaos.reports.browser import ensure_browser
from kchaos.reports.index import render_index
from kchaos.reports.run_report import render_run_report
from kchaos.rundir import RunDir
from kchaos.verifier.campaign import load_recorded
from kchaos.verifier.spark.env import SPARK_VERSION, kafka_source_jars
from kchaos.verifier.verdict import judge_run
from kchaos.workloads.java_client import client_classpath
from kchaos.workloads.native_clients import build_all as build_client_workers
from kchaos.workloads.spec import WorkloadSpec


def _cluster_dir(args: argparse.Namespace) -> Path:
    if getattr(args, "dir", None):
        return Path(args.dir).resolve()
    return state_dir() / "clusters" / args.name


def cmd_setup(args: argparse.Namespace) -> int:
    """Install everything the local backend needs, into the caches (idempotent)."""
    require_java()
    for version in args.kafka_version or ["4.2.1"]:
        jars = resolve_kafka(version)
        print(f"kafka {version}: {jars.directory}")
    print(f"toxiproxy: {ensure_toxiproxy_binary()}")
    if shutil.which("javac"):  # the Java workload client (certification campaigns); optional
        version = WorkloadSpec().java_client_version
        print(f"java workload client (kafka-clients {version}): {client_classpath(version).split(':')[0]}")
    else:
        print("java workload client: skipped (no javac: workload.client = 'java' needs a JDK)")
    if not args.no_clients:  # the workers on other clients (workload.client = franz-go, sarama, ...)
        build_client_workers()
    if not args.no_spark:
        print(f"spark {SPARK_VERSION} kafka source: {len(kafka_source_jars())} jars")
    if args.browser:
        print("browser: {} (driver {})".format(*ensure_browser()))
    if args.docker:
        setup_docker(args.kafka_version or ["4.2.1"])
    if args.clock:
        print(f"libfaketime (clock faults): {faketime.ensure_library()}")
    if args.actionlint:
        print(f"actionlint (the CI examples' linter): {ensure_actionlint()}")
    return 0


def setup_docker(versions: list[str]) -> None:
    """The Docker backend on this machine: the engine's packages, then kchaos' Kafka images built in
    a private engine (started and stopped here), so a first docker run does not wait for them."""
    installed = install_engine()
    print(f"docker engine: {'installed ' + ', '.join(installed) if installed else 'present'}")
    with tempfile.TemporaryDirectory(prefix="kchaos-setup-docker-") as tmp:
        engine = PrivateDockerEngine(Path(tmp), Path(tmp) / "pids")
        client = engine.start()
        try:
            for version in versions:
                print(f"docker image: {ensure_kafka_image(client, version, say=print)}")
        finally:
            engine.stop(client)


def cmd_cluster_up(args: argparse.Namespace) -> int:
    data: dict = {"kafka_version": args.kafka_version, "nodes": args.nodes,
                  "dedicated_controllers": args.dedicated_controllers,
                  "transaction_version": args.transaction_version, "share_version": args.share_version}
    data = {k: v for k, v in data.items() if v is not None}
    data = apply_overrides(data, args.set or [], model=ClusterSpec)
    spec = ClusterSpec.load(data)
    if spec.backend != "local":
        raise ConfigError("`kchaos cluster up` starts local clusters only", "use cluster.backend = 'local'")
    directory = _cluster_dir(args)
    if directory.exists() and live_processes(directory):
        raise ClusterError(f"a cluster is already up in {directory}", f"run `kchaos cluster down --name {args.name}` first")
    cluster = LocalJvmCluster(spec, directory)
    cluster.start()  # stops and cleans itself if start fails
    info = cluster.info()
    print(json.dumps(info, indent=2) if args.json else
          f"cluster up: {info['bootstrap_servers']}, cluster id {info['cluster_id']} (state in {directory})")
    return 0


def cmd_cluster_status(args: argparse.Namespace) -> int:
    cluster = LocalJvmCluster.attach(_cluster_dir(args))
    info = cluster.info()
    running = [n for n in info["nodes"] if n["state"] in ("running", "paused")]
    info["up"] = bool(running)
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        print(f"bootstrap: {info['bootstrap_servers']}")
        print(f"cluster id: {info['cluster_id']}")
        for node in info["nodes"]:
            print(f"  node {node['node_id']} {','.join(node['roles'])}: {node['state']} pid={node['pid']} "
                  f"proxy={node['proxy_address']} direct={node['client_address']}")
    return 0 if running else 3


def cmd_cluster_down(args: argparse.Namespace) -> int:
    directory = _cluster_dir(args)
    if not directory.exists():
        print(f"nothing to stop: {directory} does not exist")
        return 0
    try:
        LocalJvmCluster.attach(directory).stop()
    except KchaosError:
        pass  # state unreadable (crashed mid-start): the pid files below still find everything
    killed = reap(directory)
    if not args.keep:
        shutil.rmtree(directory, ignore_errors=True)
    print(f"cluster down ({len(killed)} leftover processes killed)" if killed else "cluster down")
    return 0


def _campaign_args(args: argparse.Namespace) -> tuple[Path | None, list[str], list[str]]:
    """The campaign path, and its overrides: the user's ``--set`` (replayed as given) and the same
    with every flag that sets a campaign key (validated exactly like ``--set``)."""
    given = list(args.set or [])
    validated = list(given)
    if getattr(args, "duration", None) is not None:
        given.append(f"run.duration_s={args.duration}")
        validated.append(f"run.duration_s={args.duration}")
    if getattr(args, "seed", None) is not None:
        validated.append(f"run.seed={args.seed}")
    return (Path(args.campaign) if args.campaign else None), given, validated


def cmd_run(args: argparse.Namespace) -> int:
    """One run, or ``--count`` runs with fresh seeds (harness/runs.py): the exit code of the worst,
    a single run's being its own (a certification's included)."""
    path, given, validated = _campaign_args(args)
    campaign = load_campaign(path, validated)
    # the file that ran, none given being the default: the report's replay command names it
    return run_count(campaign, Path(args.out), args.count, campaign_path=resolve_campaign_path(path),
                     overrides=given,
                     exit_first=args.exit_first, limit_s=args.time_limit,
                     junit=Path(args.junit) if args.junit else None)


def cmd_plan(args: argparse.Namespace) -> int:
    """The resolved campaign, its seeded fault schedule and an estimate of the wall time; nothing
    starts (the campaign is validated as `kchaos run` would)."""
    path, _, validated = _campaign_args(args)
    fresh = args.seed is None
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    campaign = load_campaign(path, validated, seed=seed)
    seed = campaign.run.seed if campaign.run.seed is not None else seed
    planned = plan(campaign, seed, fresh and campaign.run.seed is None, planned_schedule(campaign, seed))
    print(as_json(planned) if args.json else render_plan(planned))
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    rows = listing(args.what)
    print(as_json(rows) if args.json else render_listing(args.what, rows))
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    """Re-run a stored run: its resolved campaign, its seed and its stored fault schedule."""
    _, outcome = replay_run(Path(args.run_dir), Path(args.out))
    return outcome.exit_code


def cmd_findings(args: argparse.Namespace) -> int:
    """List the findings' claims, or replay their bundles and compare (exit 1 on any drift)."""
    evidence = Path(args.evidence)
    claims = findings.select(findings.load_claims(evidence), args.names)
    if args.action == "list":
        print(findings.claims_markdown(evidence, claims) if args.markdown else findings.listing_table(claims))
        return 0
    for release in args.releases:
        validate_kafka_version(release)
    checks = findings.verify(evidence, claims, Path(args.out), say=say, every_seed=args.every_seed,
                             releases=args.releases)
    if args.releases:  # an answer per release, not a regression test: only a failed run fails it
        print(findings.release_table(checks))
        return 0 if not any(c.error for c in checks) else 1
    print(findings.verify_table(checks))
    return 0 if all(r.holds for r in findings.claim_results(checks)) else 1


def cmd_analyze(args: argparse.Namespace) -> int:
    path = Path(args.run_dir)
    campaign = load_recorded(path)
    overrides = {k: v for k, v in (("engine", args.engine), ("spark_master", args.spark_master),
                                   ("data_dir", args.data_dir)) if v}
    run = RunDir(path)
    outcome = judge_run(run, campaign, bootstrap=args.bootstrap, overrides=overrides)
    render_report(run)  # the page shows the new results
    return outcome.exit_code


def cmd_heal(args: argparse.Namespace) -> int:
    """Undo what a run did to nodes kchaos does not own and never healed (the harness was killed)."""
    path = Path(args.run_dir)
    if not path.is_dir():
        raise ConfigError(f"{path} is not a run directory", "give the directory `kchaos run` printed")
    if not (RunDir(path).cluster_dir / JOURNAL_NAME).exists():
        # --out's directory, say, given instead of the run's: name the runs under it left unhealed
        unhealed = sorted(str(j.parent.parent) for j in path.glob(f"*/cluster/{JOURNAL_NAME}")
                          if HealJournal(j).pending())
        raise ConfigError(f"{path} has no heal journal (cluster/{JOURNAL_NAME}): it is not a run against a cluster "
                          "kchaos did not start",
                          f"heal {' and '.join(unhealed)}, the run(s) under it with acts not healed" if unhealed else
                          "give the run directory: the first line `kchaos run` printed, `run directory RUN_DIR`")
    report = heal_run(RunDir(path).cluster_dir)
    if not report:
        say("nothing to heal: every act in the heal journal was healed")
    for line in report:
        steps = "; ".join(f"{u['action']} {'ok' if u['ok'] else 'FAILED'}" + (f" ({u['said']})" if u["said"] and not u["ok"] else "")
                          for u in line["undo"])
        say(f"{where(line['node'])}: {line['action']} (act {line['id']}) {'healed' if line['healed'] else 'NOT healed'}: {steps}")
    return 0 if all(line["healed"] for line in report) else 1


def cmd_report(args: argparse.Namespace) -> int:
    for run_dir in args.run_dir:
        print(render_run_report(Path(run_dir)))
    return 0


def cmd_index(args: argparse.Namespace) -> int:
    print(render_index(Path(args.root)))
    return 0


def cmd_prune(args: argparse.Namespace) -> int:
    actions = plan_prune(Path(args.root), args.keep, slim=args.slim, include_invalid=args.include_invalid)
    for a in actions:
        if a.action != "keep" or args.verbose_actions:
            say(f"{'would ' if args.dry_run else ''}{a.action} {a.run}: {a.why}"
                + (f" ({a.freed / 1e6:.1f} MB)" if a.freed else ""))
    if not args.dry_run:
        apply_prune(actions)
    freed = sum(a.freed for a in actions)
    counts = {k: sum(a.action == k for a in actions) for k in ("keep", "delete", "slim", "skip")}
    say(f"{'dry run: ' if args.dry_run else ''}{len(actions)} runs: kept {counts['keep']}, deleted {counts['delete']}, "
        f"slimmed {counts['slim']}, left alone {counts['skip']}; {freed / 1e6:.1f} MB "
        f"{'would be ' if args.dry_run else ''}freed"
        + ("; `kchaos index` renders the index again" if counts["delete"] and not args.dry_run else ""))
    return 0


def run_estimate(campaign: Any, seed: int) -> tuple[float, float]:
    """One matrix run's estimate, as `kchaos plan` prints it: (about, at most) in seconds."""
    est = plan(campaign, seed, False, planned_schedule(campaign, seed))["estimate_s"]
    return float(sum(v for k, v in est.items() if k != "at_most")), float(est["at_most"])


def cmd_ci_nightly(args: argparse.Namespace) -> int:
    """A night of the matrix, its shard ``--shard I/N``, or with ``--plan`` the split and its
    minutes (nothing starts). Every input is checked before a cluster starts."""
    matrix = Path(args.matrix) if args.matrix else DEFAULT_MATRIX
    shard = ShardSpec.parse(args.shard) if args.shard else None
    if args.shards is not None and not args.plan:
        raise ConfigError("--shards N is for --plan (the split of a night over N shards)",
                          "run one shard of N with --shard I/N")
    if args.shards is not None and shard is not None:
        raise ConfigError("--shards and --shard together", "pass --shards N for every shard, or --shard I/N for one")
    if args.shards is not None and args.shards < 1:
        raise ConfigError(f"--shards {args.shards}: at least 1", "pass the number of shards, e.g. --shards 4")
    night_id = check_night_id(args.night_id) if args.night_id is not None else default_night_id()
    if args.plan:
        m, runs = resolve_night(matrix, night_id, args.fresh_seeds, args.entry, args.label, run_estimate)
        planned = plan_night(m.name, runs, shard.count if shard else args.shards or 1, night_id,
                             shard.index if shard else None)
        print(as_json(planned) if args.json else render_plan_night(planned, root=is_root()))
        return 0
    if args.json:
        raise ConfigError("--json is for --plan", "add --plan to print the split as JSON")
    return run_nightly(matrix, Path(args.out), args.fresh_seeds, shard=shard, night_id=night_id, entries=args.entry,
                       labels=args.label, cost=run_estimate, slim=args.slim_expected)


def cmd_ci_merge(args: argparse.Namespace) -> int:
    return merge_nights([Path(d) for d in args.dirs], Path(args.out), slim=args.slim_expected)


class Parser(argparse.ArgumentParser):
    """A usage error is a harness error (exit 3, one line), never argparse's exit 2, which a CI job
    would read as "unknown"."""

    def error(self, message: str) -> NoReturn:  # type: ignore[override]
        raise ConfigError(f"{self.prog}: {message}", f"see `{self.prog} --help`")


def _logging_options() -> argparse.ArgumentParser:
    """-v, -q and --log-format, accepted before or after the command."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS,
                        help="more detail (debug lines; a traceback with an error)")
    common.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS,
                        help="warnings and errors only")
    common.add_argument("--log-format", choices=["text", "json"], default=argparse.SUPPRESS,
                        help="stderr as text lines (default) or JSON lines")
    return common


def build_parser() -> argparse.ArgumentParser:
    common = _logging_options()
    parser = Parser(prog="kchaos", description="Chaos tests for Kafka's exactly-once guarantees", parents=[common])
    parser.add_argument("--version", action="version", version=f"kchaos {kchaos_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_parser = sub.add_parser

    def with_common(*args: Any, **kwargs: Any) -> argparse.ArgumentParser:
        return add_parser(*args, parents=[common], **kwargs)

    sub.add_parser = with_common  # type: ignore[method-assign]

    p = sub.add_parser("setup", help="install Kafka jars (Maven) and Toxiproxy (go install) into the caches")
    p.add_argument("--kafka-version", action="append", help="a release to resolve (repeatable; default 4.2.1)")
    p.add_argument("--browser", action="store_true", help="also install Chromium + ChromeDriver (report tests)")
    p.add_argument("--no-spark", action="store_true", help="skip resolving the Spark Kafka source jars")
    p.add_argument("--no-clients", action="store_true",
                   help="skip building the workers on other clients (franz-go, sarama, aiokafka, kafka-python, kafkajs)")
    p.add_argument("--docker", action="store_true",
                   help="also install the Docker engine (Debian's docker.io, as root) and build kchaos' Kafka image")
    p.add_argument("--clock", action="store_true",
                   help="also install libfaketime (Debian's faketime, as root): clock faults on the local backend")
    p.add_argument("--actionlint", action="store_true",
                   help="also build actionlint (go install): the linter make test runs on ci/examples/*.yml")
    p.set_defaults(func=cmd_setup)

    p = sub.add_parser("run", help="run a campaign (default: campaigns/default.toml)")
    p.add_argument("campaign", nargs="?", help="campaign TOML file")
    p.add_argument("--seed", type=int, help="seed for every random choice of the run")
    p.add_argument("--duration", type=float, help="seconds of workload (run.duration_s)")
    p.add_argument("--out", default="runs", help="where run directories go (default ./runs)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a campaign key, e.g. cluster.nodes=1")
    p.add_argument("--count", type=int, default=1, help="runs, each with a fresh seed (the first takes --seed); exit "
                                                         "code of the worst")
    p.add_argument("--exit-first", action="store_true", help="with --count: stop at the first run not valid")
    p.add_argument("--time-limit", type=float, metavar="SECONDS",
                   help="wind a run down (as on Ctrl-C: stop faults, heal, drain at most 60 s, verify what ran) "
                        f"after SECONDS; abort it {GRACE_S:.0f} s later")
    p.add_argument("--junit", metavar="FILE", help="write a JUnit XML file of the run(s) (schema: ci/junit.xsd)")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("plan", help="what a run would do: the resolved campaign, its fault schedule, a wall-time "
                                    "estimate (starts nothing)")
    p.add_argument("campaign", nargs="?", help="campaign TOML file or shipped campaign name")
    p.add_argument("--seed", type=int, help="the seed to plan (default: a fresh one, printed)")
    p.add_argument("--duration", type=float, help="seconds of workload (run.duration_s)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a campaign key, as for run")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("list", help="shipped campaigns, fault kinds, or fault targets")
    p.add_argument("what", choices=["campaigns", "faults", "targets"])
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("replay", help="re-run a stored run's config, seed and fault schedule")
    p.add_argument("run_dir")
    p.add_argument("--out", default="runs", help="where the new run directory goes (default ./runs)")
    p.set_defaults(func=cmd_replay)

    p = sub.add_parser("findings", help="the claims of docs/findings.md and their evidence bundles: list them, or "
                       "`verify` (replay each bundle and compare verdict and anomaly kinds; exit 1 on drift)")
    p.add_argument("action", nargs="?", choices=["list", "verify"], default="list")
    p.add_argument("names", nargs="*", help="findings (F1a), bundles, or finding:bundle (default: all)")
    p.add_argument("--evidence", default="docs/evidence", help="the bundles and their findings.toml")
    p.add_argument("--out", default="runs/findings", help="where the replays' run directories go")
    p.add_argument("--every-seed", action="store_true",
                   help="also run every claim's other seeds (findings.toml `seeds`), not only its bundle's; "
                        "a race claim's (`at_least`) always run")
    p.add_argument("--markdown", action="store_true",
                   help="list: the claims as docs/findings.md's table (which must match the registry)")
    p.add_argument("--releases", nargs="+", metavar="VERSION", default=[],
                   help="run each claim on these Kafka releases (brokers and Java clients) and print which "
                        "findings reproduce on which: the findings' release matrix")
    p.set_defaults(func=cmd_findings)

    p = sub.add_parser("analyze", help="re-check a stored run directory (no cluster needed)")
    p.add_argument("run_dir")
    p.add_argument("--engine", choices=["spark", "python"], help="checker engine (recorded in the run's campaign.json)")
    p.add_argument("--spark-master", help="local[N], local[*] or spark://host:port (default local[2])")
    p.add_argument("--bootstrap", help="re-read the topics from this live cluster through Spark's Kafka source")
    p.add_argument("--data-dir", help="with --bootstrap: where the Spark ingest writes (a URL every executor reaches)")
    p.set_defaults(func=cmd_analyze)

    p = sub.add_parser("heal", help="undo what a run did to an external cluster's nodes that it did not heal (after "
                       "the harness was killed): the run directory's heal journal, newest act first; exit 1 if any stays")
    p.add_argument("run_dir")
    p.set_defaults(func=cmd_heal)

    p = sub.add_parser("report", help="(re-)render RUN_DIR/report.html from the run directory alone")
    p.add_argument("run_dir", nargs="+")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("index", help="render ROOT/index.html: every run under ROOT, and trends across nights")
    p.add_argument("root", nargs="?", default="runs")
    p.set_defaults(func=cmd_index)

    p = sub.add_parser("prune", help="keep the newest runs under ROOT whole; delete the older ones (or --slim them)")
    p.add_argument("root")
    p.add_argument("--keep", type=int, required=True, help="how many of the newest runs to keep whole")
    p.add_argument("--slim", action="store_true", help="older runs lose their broker data only (the evidence, "
                   "results and report stay; analyze and report still work)")
    p.add_argument("--include-invalid", action="store_true", help="prune INVALID runs too (kept by default)")
    p.add_argument("--dry-run", action="store_true", help="say what would be done, do nothing")
    p.add_argument("--list", dest="verbose_actions", action="store_true", help="name the kept runs too")
    p.set_defaults(func=cmd_prune)

    ci = sub.add_parser("ci", help="entry points for CI systems")
    cisub = ci.add_subparsers(dest="ci_command", required=True)
    p = cisub.add_parser("nightly", help="run a campaign matrix; write JUnit XML and the index; exit 0/1/2/3")
    p.add_argument("--matrix", help="matrix TOML (default campaigns/nightly.toml)")
    p.add_argument("--out", default="runs-nightly", help="output root; each night gets a directory (default ./runs-nightly)")
    p.add_argument("--fresh-seeds", type=int, default=0, help="extra fresh seeds per entry on top of the matrix's")
    p.add_argument("--shard", metavar="I/N", help="run shard I of N: a split of the whole night balanced by "
                   "kchaos plan's estimates, the same on every shard (merge the N with `kchaos ci merge`)")
    p.add_argument("--night-id", metavar="ID", help="the night's name; its fresh seeds are drawn from it, so every "
                   "shard draws the same (default: the UTC date, e.g. 2026-12-01)")
    p.add_argument("--entry", action="append", default=[], metavar="NAME",
                   help="only this entry (its label, else its campaign's name) or variant (repeatable)")
    p.add_argument("--label", action="append", default=[], metavar="PATTERN",
                   help="only the variants whose label matches this shell pattern, e.g. 'default-*' (repeatable)")
    p.add_argument("--plan", action="store_true", help="print the runs and estimated minutes (about, at most) per "
                   "shard; start nothing")
    p.add_argument("--shards", type=int, metavar="N", help="with --plan: the split over N shards, every shard")
    p.add_argument("--json", action="store_true", help="with --plan: as JSON")
    p.add_argument("--slim-expected", action="store_true", help="after the night, slim every run whose verdict was "
                   "the expected one to its evidence (broker data removed); unexpected runs stay whole")
    p.set_defaults(func=cmd_ci_nightly)
    p = cisub.add_parser("merge", help="join the shards of one night: one JUnit file, summary, release table and "
                         "night in the index, one exit code (0/1/2/3)")
    p.add_argument("dirs", nargs="+", metavar="DIR", help="a shard's output folder (its --out) or night directory")
    p.add_argument("--out", default="runs-nightly", help="output root of the merged night; the shards' run "
                   "directories move into it (default ./runs-nightly)")
    p.add_argument("--slim-expected", action="store_true", help="after the merge, slim every run whose verdict was "
                   "the expected one to its evidence (broker data removed); unexpected runs stay whole")
    p.set_defaults(func=cmd_ci_merge)

    cluster = sub.add_parser("cluster", help="bring a local cluster up, inspect it, take it down")
    csub = cluster.add_subparsers(dest="cluster_command", required=True)
    for name, func, hlp in (("up", cmd_cluster_up, "start a cluster and leave it running"),
                            ("status", cmd_cluster_status, "show the nodes of a running cluster"),
                            ("down", cmd_cluster_down, "stop a cluster and everything it started")):
        p = csub.add_parser(name, help=hlp)
        p.add_argument("--name", default="default", help="cluster name (state in $KCHAOS_STATE/clusters/NAME)")
        p.add_argument("--dir", help="explicit state directory (overrides --name)")
        p.set_defaults(func=func)
        if name == "up":
            p.add_argument("--nodes", type=int)
            p.add_argument("--dedicated-controllers", type=int)
            p.add_argument("--kafka-version")
            p.add_argument("--transaction-version", type=int)
            p.add_argument("--share-version", type=int)
            p.add_argument("--set", action="append", metavar="KEY=VALUE",
                           help="cluster spec key (heap_mb=768) or broker property (broker.replica.lag.time.max.ms=10000)")
            p.add_argument("--json", action="store_true")
        elif name == "status":
            p.add_argument("--json", action="store_true")
        else:
            p.add_argument("--keep", action="store_true", help="keep the state directory (logs) after stopping")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Exit codes: 0 valid, 1 invalid, 2 unknown, 3 harness error: every failure before a verdict
    (bad input, a usage error, a missing tool, an unexpected error) is 3, with one line naming
    the cause and the fix (the traceback with -v)."""
    signals.install()
    verbose = "-v" in (argv if argv is not None else sys.argv[1:]) or "--verbose" in (argv or sys.argv[1:])
    try:
        args = build_parser().parse_args(argv)
        verbose = getattr(args, "verbose", 0) > 0
        log.configure(-1 if getattr(args, "quiet", False) else getattr(args, "verbose", 0),
                      getattr(args, "log_format", "text"))
        return args.func(args)
    except KchaosError as exc:
        print(f"kchaos: error: {exc.one_line()}", file=sys.stderr)
        if exc.detail:
            print(exc.detail, file=sys.stderr)
        if verbose:
            traceback.print_exc()
        return exc.exit_code
    except KeyboardInterrupt as exc:
        print(f"kchaos: interrupted ({exc or 'Ctrl-C'}); everything started was stopped", file=sys.stderr)
        return EXIT_HARNESS_ERROR
    except Exception as exc:  # a failure of kchaos itself, before any verdict: never 1 (invalid)
        print(f"kchaos: error: {type(exc).__name__}: {' '.join(str(exc).split())}"
              + ("" if verbose else " (run again with -v for the traceback)"), file=sys.stderr)
        if verbose:
            traceback.print_exc()
        return EXIT_HARNESS_ERROR


if __name__ == "__main__":
    sys.exit(main())
