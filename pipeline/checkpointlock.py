"""One pipeline per checkpoint directory: `checkpoint_lock` holds an exclusive lock on a
file in it while the pipeline runs.

Two pipelines on one directory would both run every query from the same checkpoints and
write every batch's changelog records twice. Spark refuses a second run of a query only
inside one session; across processes, a checkpoint file that must not be overwritten is
checked for and then renamed into place, so both pipelines would go on. So the second is
refused at start, naming the first. The lock is the operating system's (`flock`): it ends
with the pipeline's Python process however that ends, SIGKILL included, so a pipeline
that died leaves nothing to clean up. On NFS, `flock` holds across hosts only where the
mount has locking (not `nolock` or `local_lock`).
"""

from __future__ import annotations

import fcntl
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from pipeline.errors import PipelineConfigError

__all__ = ["LOCK_NAME", "checkpoint_lock"]

LOCK_NAME = ".statefed-pipeline.lock"


@contextmanager
def checkpoint_lock(directory: Path) -> Iterator[None]:
    """Hold `directory`'s lock (the directory is made if missing); PipelineConfigError
    naming the holder if another process holds it."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        handle = (directory / LOCK_NAME).open("a+", encoding="utf-8")
    except OSError as exc:
        raise PipelineConfigError(
            "STATEFED_CHECKPOINT_DIR",
            f"cannot make or open {directory / LOCK_NAME}: {exc.strerror or exc}; give the "
            f"pipeline a directory it can write",
        ) from exc
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            _say_holder(handle)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "a process that has not said which"
            raise PipelineConfigError(
                "STATEFED_CHECKPOINT_DIR",
                f"{directory} is in use by another pipeline ({holder}); two pipelines on "
                f"one directory would write every change twice: stop that one first, or "
                f"give this one a directory of its own",
            ) from None
        except OSError as exc:  # no locks on this file system (NFS without them), disk full
            raise PipelineConfigError(
                "STATEFED_CHECKPOINT_DIR",
                f"cannot lock {directory / LOCK_NAME}: {exc.strerror or exc}; give the "
                f"pipeline a directory on a file system with locks (NFS: a mount with "
                f"locking) and room to write",
            ) from exc
        yield


def _say_holder(handle: IO[str]) -> None:
    """Write who holds the lock into its file, for the message a second pipeline gets."""
    handle.seek(0)
    handle.truncate()
    handle.write(f"pid {os.getpid()} on {socket.gethostname()}\n")
    handle.flush()
