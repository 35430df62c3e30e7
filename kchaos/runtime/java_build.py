"""Java programs kchaos ships as source (package data) and compiles once into its cache: the
workload drivers (workloads/java_client.py) and the batch of KIP-664 queries (kafka_tools.py).
A wheel installs the sources as plain files, and a JDK on the machine compiles them on first use."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
from pathlib import Path

from kchaos.errors import SetupError
from kchaos.paths import cache_dir
from kchaos.runtime.artifacts import require_java


def require_javac(what: str) -> str:
    javac = shutil.which("javac")
    if javac is None:
        raise SetupError(f"{what} needs a JDK (javac), not only a JRE",
                         "install one, e.g. `apt-get install openjdk-17-jdk-headless`")
    return javac


def compiled_classes(main_class: str, sources: list[Path], classpath: str, key: str, what: str,
                     hint: str) -> Path:
    """The directory of ``main_class`` compiled from ``sources`` against ``classpath``, built once
    per (sources, ``key``) into the cache; a failed compile is a SetupError saying ``what`` did not
    compile, with ``hint``. Built beside its final place and renamed, so that a compile cut short
    never leaves a half-filled directory that looks built."""
    digest = hashlib.sha256(b"".join(s.read_bytes() for s in sources) + key.encode()).hexdigest()[:12]
    classes = cache_dir() / "java" / (f"{main_class}-{key}-{digest}" if key else f"{main_class}-{digest}")
    if (classes / f"{main_class}.class").exists():
        return classes
    require_java()
    javac = require_javac(what)
    classes.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{main_class}-", dir=classes.parent))
    try:
        proc = subprocess.run([javac, "-nowarn", *(["-cp", classpath] if classpath else []), "-d", str(work),
                               *map(str, sources)], capture_output=True, text=True)
        if proc.returncode != 0:
            raise SetupError(f"{what} did not compile", hint, detail=(proc.stdout + proc.stderr)[-3000:])
        if classes.exists() and not (classes / f"{main_class}.class").exists():
            shutil.rmtree(classes)
        try:
            work.rename(classes)
        except OSError:  # another process built it meanwhile (two test workers, two runs): use theirs
            if not (classes / f"{main_class}.class").exists():
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return classes
