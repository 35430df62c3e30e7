"""Worker processes: start, supervise, restart, and the client faults the workload supports.

Each worker slot (``w0`` ... ``w{W-1}``) has one *current* process and possibly older ones
(a paused zombie, a process whose transactional.id was taken over). A current process that
exits non-zero is restarted as a new incarnation (same slot, same transactional.id); an older
one that exits is only recorded. Every start, exit, crash, restart and client fault is an
event in the harness history.

Client faults:

* :meth:`crash` SIGKILLs the current process (the supervisor restarts it);
* :meth:`pause` SIGSTOPs it for a while, then SIGCONTs it;
* :meth:`zombie` pauses it past the transaction timeout, starts a replacement with the same
  transactional.id, then resumes the old one, which must find itself fenced;
* :meth:`takeover` starts a second process with the same transactional.id while the first runs.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kchaos.errors import ConfigError
from kchaos.runtime.processes import ManagedProcess
from kchaos.waiting import WaitTimeout, gone_within, wait_until
from kchaos.workloads.history import HistoryWriter
from kchaos.workloads.java_client import CTP_WORKER, STREAMS_APP, java_argv, worker_properties
from kchaos.workloads.native_clients import CLIENTS, native_argv
from kchaos.workloads.registry import java_classpath, worker_command
from kchaos.workloads.spec import WorkloadSpec

EXIT_NAMES = {0: "stopped", 10: "fenced", 11: "fatal", 12: "unknown-outcome", -9: "killed", -15: "terminated"}


@dataclass
class WorkerProcess:
    slot: str
    incarnation: int
    process: ManagedProcess
    started: float
    exit_recorded: bool = False


@dataclass
class WorkerSlot:
    name: str
    incarnations: int = 0
    current: WorkerProcess | None = None
    others: list[WorkerProcess] = field(default_factory=list)


class WorkerPool:
    def __init__(self, spec: WorkloadSpec, client: dict[str, Any], run_dir: Path, seed: int, txid_prefix: str,
                 history: HistoryWriter):
        self.spec = spec
        self.client = client
        self.dir = Path(run_dir) / "workers"
        self.history_dir = Path(run_dir) / "history"
        self.seed = seed
        self.txid_prefix = txid_prefix
        self.history = history
        self.slots = {f"w{i}": WorkerSlot(f"w{i}") for i in range(spec.workers)}
        self.stopping = False
        self.restarts = 0
        self._lock = threading.RLock()
        self._supervisor = threading.Thread(target=self._supervise, name="worker-supervisor", daemon=True)

    # -- processes -------------------------------------------------------------------------
    def _argv(self, config_path: Path, config: dict[str, Any]) -> list[str]:
        if self.spec.external_command:
            return [*self.spec.external_command]
        slot = config.get("slot") or {}
        client, version = slot.get("client", "confluent"), slot.get("version")
        if client in ("java", "streams"):
            driver = STREAMS_APP if client == "streams" else CTP_WORKER
            props = config_path.with_suffix(".properties")
            props.write_text(worker_properties(config))
            return java_argv(java_classpath(client, version), props, driver)
        if client in CLIENTS:  # a worker on another client (built before the cluster started)
            return native_argv(worker_command(client, version), config_path, config)
        module = {"share": "kchaos.workloads.share_worker", "txn": "kchaos.workloads.txn_worker"}.get(
            self.spec.kind, "kchaos.workloads.ctp_worker")
        return [sys.executable, "-m", module, str(config_path)]

    def slot_info(self, name: str) -> dict[str, Any]:
        """What slot ``name`` runs (workload.client or its fleet entry, workloads/registry.py): its
        client, release, label and the group protocol it joins with; empty for a user's app."""
        if self.spec.external_command:
            return {}
        index = int(name[1:])
        slot = self.spec.slot_client(index)
        return {"client": slot.client, "version": slot.version, "label": slot.label,
                "group_protocol": self.spec.group_protocol_of(index) if slot.client != "streams"
                else self.spec.group_protocol}

    def _spawn(self, slot: WorkerSlot) -> WorkerProcess:
        slot.incarnations += 1
        inc = slot.incarnations
        name = f"{slot.name}.{inc}"
        self.dir.mkdir(parents=True, exist_ok=True)
        config_path = self.dir / f"{name}.json"
        info = self.slot_info(slot.name)
        config = {"workload": self.spec.model_dump(mode="json"), "worker": slot.name, "incarnation": inc,
                  "client": self.client, "seed": self.seed, "txid_prefix": self.txid_prefix,
                  "history_path": str(self.history_dir / f"{name}.jsonl"), "slot": info}
        config_path.write_text(json.dumps(config, indent=2))
        env = dict(os.environ)
        env.update({
            "KCHAOS_BOOTSTRAP_SERVERS": self.client["bootstrap.servers"],
            "KCHAOS_INPUT_TOPIC": self.spec.input_topic,
            "KCHAOS_OUTPUT_TOPICS": ",".join(self.spec.output_topics),
            "KCHAOS_GROUP_ID": self.spec.group_id,
            "KCHAOS_TRANSACTIONAL_ID": f"{self.txid_prefix}-{slot.name}",
            "KCHAOS_WORKER": slot.name, "KCHAOS_INCARNATION": str(inc),
            "KCHAOS_WORKER_CONFIG": str(config_path),
            # the harness's own interpreter (confluent-kafka installed): a Python app needs no venv of its own
            "KCHAOS_PYTHON": sys.executable,
        })
        jars = self.spec.external_jars()  # resolved before the cluster started (harness prepare_artifacts)
        if jars is not None:
            env["KCHAOS_CLASSPATH"] = jars.classpath
        # The marker (the run directory) must be on the command line for reaping; an external
        # command gets it as the env of a tiny exec wrapper.
        argv = self._argv(config_path, config)
        marker = str(self.dir)
        if marker not in " ".join(argv):
            argv = ["/bin/sh", "-c", 'exec "$@"', marker, *argv]
        proc = ManagedProcess(name, argv, self.dir / f"{name}.log", self.dir / "pids", marker, env=env,
                              cwd=Path.cwd())
        proc.start()
        wp = WorkerProcess(slot.name, inc, proc, time.time())
        # the slot's client implementation, release and label (the certification's rows are by label)
        self.history.event("worker-start", {"slot": slot.name, "incarnation": inc, "pid": proc.pid,
                                            "client": info.get("client") or self.spec.client_of(int(slot.name[1:])),
                                            **({"client_version": info["version"], "label": info["label"]}
                                               if info else {})}, outcome="ok")
        return wp

    def start(self) -> None:
        with self._lock:
            for slot in self.slots.values():
                slot.current = self._spawn(slot)
        self._supervisor.start()

    def _supervise(self) -> None:
        while not self.stopping:
            with self._lock:
                for slot in self.slots.values():
                    self._check(slot)
            time.sleep(0.2)

    def _record_exit(self, wp: WorkerProcess, current: bool) -> None:
        wp.process.forget_if_exited()  # status collected, pid file removed
        code = wp.process.returncode()
        wp.exit_recorded = True
        self.history.event("worker-exit", {"slot": wp.slot, "incarnation": wp.incarnation, "exit_code": code,
                                           "meaning": EXIT_NAMES.get(code if code is not None else 0, "crashed"),
                                           "current": current})

    def _check(self, slot: WorkerSlot) -> None:
        for wp in slot.others:
            if not wp.exit_recorded and not wp.process.is_running():
                self._record_exit(wp, current=False)
        wp = slot.current
        if wp is None or wp.process.is_running():
            return
        self._record_exit(wp, current=True)
        slot.others.append(wp)
        slot.current = None
        if self.stopping:
            return
        if self.spec.restart_backoff_s:
            time.sleep(self.spec.restart_backoff_s)
        self.restarts += 1
        slot.current = self._spawn(slot)
        self.history.event("worker-restart", {"slot": slot.name, "incarnation": slot.current.incarnation}, outcome="ok")

    def _slot(self, name: str) -> WorkerSlot:
        if name not in self.slots:
            raise ConfigError(f"no worker slot {name!r}; slots are {', '.join(self.slots)}")
        return self.slots[name]

    # -- client faults ---------------------------------------------------------------------
    def crash(self, slot_name: str) -> dict[str, Any]:
        with self._lock:
            slot = self._slot(slot_name)
            wp = slot.current
            if wp is None:
                return {"slot": slot_name, "skipped": "no current process"}
            wp.process.kill()
            return {"slot": slot_name, "incarnation": wp.incarnation}

    def pause(self, slot_name: str, seconds: float) -> dict[str, Any]:
        with self._lock:
            wp = self._slot(slot_name).current
        if wp is None:
            return {"slot": slot_name, "skipped": "no current process"}
        wp.process.pause()
        time.sleep(seconds)
        wp.process.resume()
        return {"slot": slot_name, "incarnation": wp.incarnation, "paused_s": seconds}

    def suspend(self, slot_name: str) -> dict[str, Any]:
        """SIGSTOP the current process of a slot until :meth:`resume_all`."""
        with self._lock:
            wp = self._slot(slot_name).current
            if wp is None:
                return {"slot": slot_name, "skipped": "no current process"}
            wp.process.pause()
            return {"slot": slot_name, "incarnation": wp.incarnation}

    def restart_all(self, timeout_s: float = 60.0) -> list[dict[str, Any]]:
        """Restart every worker in turn, gracefully (SIGTERM: the current transaction finishes),
        waiting for each replacement to start: what an operator does so that long-lived clients
        pick up a new feature level (a client learns finalised features on new connections)."""
        done = []
        for name in list(self.slots):
            with self._lock:
                wp = self.slots[name].current
            if wp is None:
                continue
            wp.process.signal(15)

            def replaced(name: str = name, wp: WorkerProcess = wp) -> bool:
                with self._lock:
                    current = self.slots[name].current
                return current is not None and current is not wp

            try:
                wait_until(replaced, timeout_s, 0.1)
            except WaitTimeout:
                wp.process.kill()  # the supervisor restarts it
            done.append({"slot": name, "old_incarnation": wp.incarnation})
        return done

    def resume_all(self) -> None:
        for wp in self.all_processes():
            if wp.process.is_running() and wp.process.is_paused():
                wp.process.resume()

    def zombie(self, slot_name: str, pause_s: float | None = None, overlap_s: float = 5.0) -> dict[str, Any]:
        """Pause past the transaction timeout, replace, resume the old one: it must be fenced."""
        pause_s = pause_s if pause_s is not None else self.spec.transaction_timeout_ms / 1000 + 5
        with self._lock:
            slot = self._slot(slot_name)
            old = slot.current
            if old is None:
                return {"slot": slot_name, "skipped": "no current process"}
            old.process.pause()
            # The supervisor must not restart the paused one: it stops being current now.
            slot.others.append(old)
            slot.current = None
        time.sleep(pause_s)
        with self._lock:
            slot.current = self._spawn(slot)
            new_inc = slot.current.incarnation
        time.sleep(overlap_s)  # let the replacement initialise (and fence) before the zombie wakes
        old.process.resume()
        return {"slot": slot_name, "zombie_incarnation": old.incarnation, "replacement_incarnation": new_inc,
                "paused_s": pause_s}

    def takeover(self, slot_name: str) -> dict[str, Any]:
        """A second process with the same transactional.id; the first must be fenced."""
        with self._lock:
            slot = self._slot(slot_name)
            old = slot.current
            if old is not None:
                slot.others.append(old)
            slot.current = self._spawn(slot)
            return {"slot": slot_name, "old_incarnation": old.incarnation if old else None,
                    "new_incarnation": slot.current.incarnation}

    # -- stop ------------------------------------------------------------------------------
    def all_processes(self) -> list[WorkerProcess]:
        with self._lock:
            out = []
            for slot in self.slots.values():
                out.extend(slot.others)
                if slot.current:
                    out.append(slot.current)
            return out

    def stop(self, timeout_s: float = 60.0) -> None:
        """Graceful: SIGTERM (each finishes its transaction), then SIGKILL whatever is left."""
        self.stopping = True
        if self._supervisor.is_alive():
            self._supervisor.join(timeout=10)
        procs = self.all_processes()
        for wp in procs:
            if wp.process.is_running():
                wp.process.resume()
                wp.process.signal(15)
        gone_within(lambda: any(wp.process.is_running() for wp in procs), timeout_s, 0.1)
        for wp in procs:
            running = wp.process.is_running()
            if not wp.exit_recorded and not running:
                self._record_exit(wp, current=wp in [s.current for s in self.slots.values()])
            if running:
                wp.process.kill()
                self._record_exit(wp, current=False)
