"""A broker's wall clock under kchaos' control: Debian's libfaketime preloaded into its JVM.

The library reads the clock's offset from a file (``FAKETIME_TIMESTAMP_FILE``) at most once a
second (``FAKETIME_CACHE_DURATION``), so a fault moves a running broker's clock by rewriting that
file. Only the wall clock moves: the monotonic clock stays true (``FAKETIME_DONT_FAKE_MONOTONIC``),
as a real clock step or NTP slew leaves the JVM's ``System.nanoTime`` alone. What Kafka stamps
and times by the wall clock (``Time.milliseconds``: transaction timeouts, producer-id and
transactional-id expiry, LogAppendTime, marker timestamps) follows the offset.

The multi-threaded build (``libfaketimeMT``) is the one a JVM needs: its state is read by every
thread that asks the time. Its cost, measured on this machine: ``System.currentTimeMillis`` about
1 µs a call instead of 35 ns (the single-threaded build 0.2 µs, but unsafe here); only the
brokers of a campaign with clock faults pay it. It is installed with
``kchaos setup --clock`` (Debian's ``faketime`` and ``libfaketime``, as root), or by the run that
needs it when it can.
"""

from __future__ import annotations

import glob
from pathlib import Path

from kchaos.errors import SetupError
from kchaos.runtime.debian import apt_install, can_install

PACKAGES = ("faketime", "libfaketime")
INSTALL_HINT = "run `kchaos setup --clock` (installs Debian's faketime and libfaketime as root)"
#: how often (seconds) the preloaded library re-reads the offset: the lag of a clock change
CACHE_S = 1


def library() -> Path | None:
    found = sorted(glob.glob("/usr/lib/*/faketime/libfaketimeMT.so.1")) + sorted(glob.glob("/usr/lib/faketime/libfaketimeMT.so.1"))
    return Path(found[0]) if found else None


def ensure_library() -> Path:
    """The library's path, installing Debian's packages first when missing (root, apt)."""
    path = library()
    if path:
        return path
    if not can_install():
        raise SetupError("clock faults need libfaketime (libfaketimeMT.so.1), which is not installed", INSTALL_HINT)
    proc = apt_install(PACKAGES)
    path = library()
    if path is None:
        raise SetupError("installing libfaketime failed", "read apt-get's output below",
                         detail=(proc.stdout + proc.stderr)[-3000:])
    return path


def offset_text(offset_s: float) -> str:
    """The control file's content for a wall clock ``offset_s`` seconds from the true one."""
    return f"{offset_s:+.3f}\n"


def write_offset(control: Path, offset_s: float) -> None:
    """Set the offset; the broker follows when the library next reads the file (it looks about
    every :data:`CACHE_S`; measured here: up to 3 s). Written whole, then renamed, so that the
    library never reads half a line."""
    tmp = control.with_name(control.name + ".tmp")
    tmp.write_text(offset_text(offset_s))
    tmp.replace(control)


def environment(control: Path, lib: Path) -> dict[str, str]:
    """What a JVM's environment needs for its wall clock to follow ``control``."""
    return {"LD_PRELOAD": str(lib), "FAKETIME_TIMESTAMP_FILE": str(control),
            "FAKETIME_CACHE_DURATION": str(CACHE_S), "FAKETIME_DONT_FAKE_MONOTONIC": "1",
            # Debian's build turns its "monotonic fix" on by itself on this glibc, and with it every
            # timed wait of the JVM (parkNanos, Object.wait) returns at once: the broker's threads
            # spin and it crawls (measured: 500 parks of 2 ms took 36 ms instead of 2154). Off.
            "FAKETIME_FORCE_MONOTONIC_FIX": "0"}
