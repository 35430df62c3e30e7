"""A Spark standalone cluster (one master, one worker) started from pyspark's own jars.

For tests and for trying ``--spark-master spark://...`` on one machine; users with a real Spark
cluster point the verifier at its master instead. Processes are recorded by pid files under the
given directory (the never-leak rules of clusters/processes.py apply: ``stop()`` or a reaper on
that directory kills the master, the worker and the executors it launched).

    python -m kchaos.verifier.standalone DIR      # start, print the master URL, stay up until Ctrl-C
"""

from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path

from kchaos.clusters.artifacts import require_java
from kchaos.clusters.processes import ManagedProcess
from kchaos.errors import SetupError
from kchaos.waiting import wait_until
from kchaos.verifier.spark_env import pyspark_home


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class StandaloneSpark:
    def __init__(self, directory: Path, worker_cores: int = 2, worker_memory: str = "2g"):
        self.directory = directory.resolve()
        self.worker_cores, self.worker_memory = worker_cores, worker_memory
        self.port = _free_port()
        self.processes: list[ManagedProcess] = []

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _process(self, name: str, main_class: str, args: list[str]) -> ManagedProcess:
        home = pyspark_home()
        argv = [require_java(), "-Xmx384m", f"-Dkchaos.dir={self.directory}", "-cp", f"{home / 'jars'}/*",
                main_class, *args]
        env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOG_DIR": str(self.directory / "logs"),
               "SPARK_WORKER_DIR": str(self.directory / "work"), "SPARK_LOCAL_IP": "127.0.0.1",
               # pyspark has no RELEASE file: without this the launcher looks for a source build
               "SPARK_SCALA_VERSION": "2.13"}
        return ManagedProcess(name, argv, self.directory / "logs" / f"{name}.log", self.directory / "pids",
                              marker=str(self.directory), env=env, cwd=self.directory)

    def start(self, timeout_s: float = 90.0) -> "StandaloneSpark":
        self.directory.mkdir(parents=True, exist_ok=True)
        master = self._process("spark-master", "org.apache.spark.deploy.master.Master",
                               ["--host", "127.0.0.1", "--port", str(self.port), "--webui-port", str(_free_port())])
        worker = self._process("spark-worker", "org.apache.spark.deploy.worker.Worker",
                               ["--host", "127.0.0.1", "--cores", str(self.worker_cores), "--memory", self.worker_memory,
                                "--work-dir", str(self.directory / "work"), "--webui-port", str(_free_port()),
                                self.master_url])
        for process in (master, worker):
            process.log_path.unlink(missing_ok=True)  # readiness is read from a fresh log
        try:
            master.start()
            self.processes.append(master)
            wait_until(lambda: "I have been elected leader" in master.log_path.read_text(errors="replace"),
                       timeout_s, err_msg=f"the Spark master did not start (log: {master.log_path})")
            worker.start()
            self.processes.append(worker)
            wait_until(lambda: "Successfully registered with master" in worker.log_path.read_text(errors="replace"),
                       timeout_s, err_msg=f"the Spark worker did not register (log: {worker.log_path})")
        except BaseException as exc:
            self.stop()
            if isinstance(exc, Exception) and not isinstance(exc, SetupError):
                raise SetupError(f"could not start a standalone Spark cluster: {exc}",
                                 f"see the logs in {self.directory / 'logs'}") from exc
            raise
        return self

    def stop(self) -> None:
        from kchaos.clusters.processes import reap

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
