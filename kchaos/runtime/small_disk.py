"""A broker's log directory on a filesystem of its own, small enough to fill: a tmpfs of
``cluster.disk_limit_mb`` mounted on the node's data directory (local backend, root).

The ``disk-full`` fault (faults/kinds/disk.py) fills it with one file, leaving ``leave_mb``, and
its heal deletes that file: the broker meets ENOSPC on its next append and handles it as it will
(Kafka takes the log directory offline; a node whose only log directory failed shuts down).

The mounts carry the source name ``kchaos-disk``. At stop the data is copied back onto the run
directory's disk before the unmount, so the run keeps its brokers' logs as any run does. A mount
left behind by a harness that died is unmounted by the reaper (its data is then lost) and by the
next start in the same directory.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from kchaos.errors import CapabilityError, ClusterError

SOURCE = "kchaos-disk"
FILLER = "kchaos-disk-filler"


def check_can_mount() -> None:
    if os.geteuid() != 0 or not shutil.which("mount"):
        raise CapabilityError("disk faults mount a small filesystem for each broker's log directory: that needs root "
                              "and mount(8)", "run as root, or drop the disk faults")


def mounts_under(root: Path) -> list[Path]:
    """kchaos' small disks mounted at or below ``root``, deepest first."""
    root = root.resolve()
    found = []
    for line in Path("/proc/mounts").read_text().splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[0] == SOURCE:
            point = Path(fields[1].replace("\\040", " "))
            if point == root or root in point.parents:
                found.append(point)
    return sorted(found, key=lambda p: len(p.parts), reverse=True)


def mount(path: Path, size_mb: int) -> None:
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m,mode=0755", SOURCE, str(path)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise ClusterError(f"mounting a {size_mb} MB filesystem on {path} failed: {done.stderr.strip()}")


def unmount(path: Path, keep: bool = True) -> None:
    """Unmount one small disk; with ``keep``, its files are copied back onto the disk beneath first
    (the filler is not: it is the fault, not the broker's data)."""
    kept = path.with_name(path.name + ".kept")
    if keep:
        shutil.rmtree(kept, ignore_errors=True)
        shutil.copytree(path, kept, symlinks=True, ignore=shutil.ignore_patterns(FILLER))
    done = subprocess.run(["umount", str(path)], capture_output=True, text=True)
    if done.returncode != 0:  # still busy: detach it, the kernel frees it when the last user goes
        subprocess.run(["umount", "-l", str(path)], capture_output=True, text=True)
    if keep:
        shutil.rmtree(path, ignore_errors=True)
        kept.rename(path)


def unmount_all(root: Path, keep: bool = True) -> list[Path]:
    points = mounts_under(root)
    for point in points:
        unmount(point, keep)
    return points


def usage(path: Path) -> dict[str, int]:
    st = os.statvfs(path)
    return {"size_bytes": st.f_blocks * st.f_frsize, "free_bytes": st.f_bavail * st.f_frsize}


def fill(path: Path, leave_mb: float) -> dict[str, int]:
    """Take all the free space but ``leave_mb`` with one file; what was free before and after."""
    before = usage(path)["free_bytes"]
    size = max(0, before - int(leave_mb * 1024 * 1024))
    filler = path / FILLER
    # unbuffered: a buffered file keeps the tail of a write the full filesystem cut short and
    # flushes it at close, outside the try below, raising ENOSPC from the fault (nemesis-all on
    # 4.2.1: the broker appended a few KB after the free space was read, fallocate then refused)
    with open(filler, "ab", buffering=0) as f:
        if size:
            try:
                os.posix_fallocate(f.fileno(), f.tell(), size)
            except OSError:  # no room for all of it (the free space read is stale), or no fallocate: write it
                chunk = b"\0" * (1 << 20)
                left = size
                try:
                    while left > 0:
                        left -= f.write(chunk[:min(left, len(chunk))])
                except OSError:
                    pass
    return {"free_before_bytes": before, "filled_bytes": filler.stat().st_size,
            "free_after_bytes": usage(path)["free_bytes"]}


def free(path: Path) -> int:
    """Delete the filler; the bytes it held."""
    filler = path / FILLER
    held = filler.stat().st_size if filler.exists() else 0
    filler.unlink(missing_ok=True)
    return held
