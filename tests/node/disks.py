"""Disks for fault tests: a small real filesystem (tmpfs) the test mounts, fills and
empties. Mounting needs root (CAP_SYS_ADMIN), which the test machines and CI have."""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

FILLER = "filler"


@contextmanager
def small_disk(path: Path, size_mb: int) -> Iterator[Path]:
    """A tmpfs of `size_mb` MiB mounted at `path` for the block; unmounted after it."""
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert mounted.returncode == 0, (
        f"cannot mount a {size_mb} MiB tmpfs at {path} (the disk fault tests need root): "
        f"{mounted.stderr.strip()}"
    )
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=True)


def fill(disk: Path, leave_bytes: int = 0) -> Path:
    """Fill `disk` with a filler file until writes fail, then give back `leave_bytes`."""
    filler = disk / FILLER
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    chunk = b"\0" * 65536
    try:
        while True:
            try:
                os.write(fd, chunk)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                if len(chunk) == 1:
                    break
                chunk = chunk[: len(chunk) // 2]
    finally:
        os.close(fd)
    if leave_bytes:
        os.truncate(filler, max(0, filler.stat().st_size - leave_bytes))
    return filler
