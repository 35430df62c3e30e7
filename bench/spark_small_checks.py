"""Benchmark: a Spark session checking small runs again and again, as the test session does,
under three driver profiles side by side.

    python bench/spark_small_checks.py [--checks 4] [--rounds 2]

The Spark tests check hand-made runs of a few records each, dozens of them in one session. At
that size the work is not the data: each check plans about 56 small jobs, Spark generates
classes for them, and the JVM compiles those classes. This measures, for one clean generated
run of the tests' own kind (tests/generated_runs.py: three partitions of six inputs, complete
evidence), each profile in a JVM of its own, the profiles alternating for ``--rounds``:

- ``job``: what the Spark job itself chooses at this size (C1 only, code generation on);
- ``c2``: both JIT compilers, as the test session had before;
- ``interpreted``: C1 only, whole-stage code generation off and expressions interpreted
  (the test session's profile, tests/conftest.py).

It prints the first check's wall time (cold) and the mean of the later ones (warm), with the
driver JVM's CPU seconds per warm check (``/proc``), and the load average. Every check must say
``valid``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PROFILES = {
    "job": ("quick", {}),
    "c2": ("full", {}),
    "interpreted": ("quick", {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}),
}

_ONE_PROFILE = """
import json, os, sys, tempfile, time
from pathlib import Path
run, jit, conf, checks = Path(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4])
os.chdir(tempfile.mkdtemp())  # Spark leaves artifacts/ in the driver's working directory
from kchaos.verifier.spark.env import spark_session
from kchaos.verifier.spark.checks import check_run_spark
spark = spark_session("local[2]", app="bench", driver_memory="1g", jit=jit,
                      extra_conf={"spark.sql.shuffle.partitions": "1", "spark.sql.adaptive.enabled": "false", **conf})
pid = spark.sparkContext._jvm.ProcessHandle.current().pid()
def jvm_cpu():
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
out = []
for _ in range(checks):
    cpu, t = jvm_cpu(), time.monotonic()
    verdict = check_run_spark(spark, run).verdict
    out.append({"wall_s": time.monotonic() - t, "jvm_cpu_s": jvm_cpu() - cpu, "verdict": verdict})
spark.stop()
print(json.dumps(out))
"""


def measure(run: Path, profile: str, checks: int) -> list[dict]:
    jit, conf = PROFILES[profile]
    proc = subprocess.run([sys.executable, "-c", _ONE_PROFILE, str(run), jit, json.dumps(conf), str(checks)],
                          capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        raise SystemExit(f"{profile} failed:\n{proc.stderr[-3000:]}")
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    wrong = [c["verdict"] for c in found if c["verdict"] != "valid"]
    if wrong:
        raise SystemExit(f"{profile}: a clean run was judged {wrong}")
    return found


def main() -> int:
    from tests.generated_runs import World

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checks", type=int, default=4, help="checks per session (the first is cold)")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    if args.checks < 2:
        parser.error("--checks must be at least 2 (one cold, one warm)")
    with tempfile.TemporaryDirectory(prefix="kchaos-bench-") as tmp:
        run = World(partitions=3, inputs_per_partition=[6, 6, 6], k=2, workers=2, delivery="exactly-once",
                    seed=1).generate().write(Path(tmp) / "run")
        print(f"a generated clean run of 18 inputs, {args.checks} checks per session, local[2]")
        print("| round | profile | first check s | later checks s (mean) | JVM CPU s per later check | load |")
        print("| --- | --- | --- | --- | --- | --- |")
        for rnd in range(1, args.rounds + 1):
            for profile in PROFILES:
                found = measure(run, profile, args.checks)
                warm = found[1:]
                print(f"| {rnd} | {profile} | {found[0]['wall_s']:.1f} | {sum(c['wall_s'] for c in warm) / len(warm):.1f} "
                      f"| {sum(c['jvm_cpu_s'] for c in warm) / len(warm):.1f} | {os.getloadavg()[0]:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
