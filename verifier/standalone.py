"""A Spark standalone cluster (one master, N workers) started from pyspark's own jars.

For tests and for trying ``--spark-master spark://...`` on one machine; users with a real Spark
cluster point the verifier at its master instead. Processes are recorded by pid files under the
given directory (the never-leak rules of kchaos/runtime/processes.py apply: ``stop()`` or a reaper on
that directory kills the master, the workers and the executors they launched).

Each worker has its own work and scratch directories. ``hidden`` paths are made unreadable to
the workers and their executors, as they would be on other machines: each worker runs in a mount
namespace of its own (``unshare --mount``, root or user namespaces needed) with an empty tmpfs
mounted over each hidden path. That is how a test shows that the verifier's executors read
nothing from the driver's run directory.

    python -m kchaos.verifier.standalone DIR      # start, print the master URL, stay up until Ctrl-C
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from kchaos.errors import SetupError
from kchaos.runtime.artifacts import require_java
from kchaos.runtime.ports import free_port
from kchaos.runtime.processes import ManagedProcess, reap
from kchaos.verifier.spark.env import pyspark_home
from kchaos.waiting import wait_until


_HIDE_THEN_EXEC = ('while [ "$1" != -- ]; do mount -t tmpfs -o size=1m,mode=000 kchaos-hidden "$1" || exit 97; '
                   'shift; done; shift; exec "$@"')


def _hiding(paths: list[Path]) -> list[str]:
    """argv prefix: a private mount namespace with an empty tmpfs over each path, then exec the
    rest (same pid throughout, so the pid file tracks the JVM)."""
    if not paths:
        return []
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", _HIDE_THEN_EXEC, "sh",
            *map(str, paths), "--"]


def can_hide_paths() -> bool:
    """Whether this process may hide paths from a worker (a mount namespace and a tmpfs mount)."""
    import shutil
    import subprocess
    import tempfile

    if shutil.which("unshare") is None:
        return False
    with tempfile.TemporaryDirectory() as probe:
        done = subprocess.run([*_hiding([Path(probe)]), "true"], capture_output=True, timeout=30)
    return done.returncode == 0


class StandaloneSpark:
    def __init__(self, directory: Path, worker_cores: int = 2, worker_memory: str = "2g", workers: int = 1,
                 hidden: list[Path] | tuple[Path, ...] = ()):
        self.directory = directory.resolve()
        self.worker_cores, self.worker_memory, self.workers = worker_cores, worker_memory, workers
        self.hidden = [Path(p).resolve() for p in hidden]
        self.port = free_port()
        self.processes: list[ManagedProcess] = []

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def work_dir(self, worker: int) -> Path:
        """Worker ``worker``'s work directory: its executors' logs are in ``app-*/<n>/stderr``."""
        return self.directory / f"work-{worker}"

    def _process(self, name: str, main_class: str, args: list[str], work: Path | None = None,
                 hidden: list[Path] | None = None) -> ManagedProcess:
        home = pyspark_home()
        argv = [*_hiding(hidden or []), require_java(), "-Xmx384m", f"-Dkchaos.dir={self.directory}",
                "-cp", f"{home / 'jars'}/*", main_class, *args]
        env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOG_DIR": str(self.directory / "logs"),
               "SPARK_LOCAL_IP": "127.0.0.1",
               # pyspark has no RELEASE file: without this the launcher looks for a source build
               "SPARK_SCALA_VERSION": "2.13"}
        if work is not None:  # the worker's and its executors' own directories
            work.mkdir(parents=True, exist_ok=True)
            (work / "scratch").mkdir(exist_ok=True)
            env.update(SPARK_WORKER_DIR=str(work), SPARK_LOCAL_DIRS=str(work / "scratch"))
        return ManagedProcess(name, argv, self.directory / "logs" / f"{name}.log", self.directory / "pids",
                              marker=str(self.directory), env=env, cwd=work or self.directory)

    def start(self, timeout_s: float = 90.0) -> "StandaloneSpark":
        self.directory.mkdir(parents=True, exist_ok=True)
        if self.hidden and not can_hide_paths():
            raise SetupError("cannot hide paths from Spark workers here (no mount namespace)",
                             "run as root or enable unprivileged user namespaces, or start the workers without hidden paths")
        master = self._process("spark-master", "org.apache.spark.deploy.master.Master",
                               ["--host", "127.0.0.1", "--port", str(self.port), "--webui-port", str(free_port())])
        workers = [self._process(f"spark-worker-{i}", "org.apache.spark.deploy.worker.Worker",
                                 ["--host", "127.0.0.1", "--cores", str(self.worker_cores), "--memory", self.worker_memory,
                                  "--work-dir", str(self.work_dir(i)), "--webui-port", str(free_port()),
                                  self.master_url], work=self.work_dir(i), hidden=self.hidden)
                   for i in range(self.workers)]
        for process in (master, *workers):
            process.log_path.unlink(missing_ok=True)  # readiness is read from a fresh log
        try:
            master.start()
            self.processes.append(master)
            wait_until(lambda: "I have been elected leader" in master.log_path.read_text(errors="replace"),
                       timeout_s, err_msg=f"the Spark master did not start (log: {master.log_path})")
            for worker in workers:
                worker.start()
                self.processes.append(worker)
            for worker in workers:
                wait_until(lambda: "Successfully registered with master" in worker.log_path.read_text(errors="replace"),
                           timeout_s, err_msg=f"a Spark worker did not register (log: {worker.log_path})")
        except BaseException as exc:
            self.stop()
            if isinstance(exc, Exception) and not isinstance(exc, SetupError):
                raise SetupError(f"could not start a standalone Spark cluster: {exc}",
                                 f"see the logs in {self.directory / 'logs'}") from exc
            raise
        return self

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.kill()
        self.processes.clear()
        reap(self.directory)

    def __enter__(self) -> "StandaloneSpark":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


if __name__ == "__main__":
    from kchaos import signals

    signals.install()
    cluster = StandaloneSpark(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("spark-standalone"))
    with cluster:
        print(cluster.master_url, flush=True)
        try:
            while True:
                time.sleep(1)
        except KeyboardInterrupt:
            pass
