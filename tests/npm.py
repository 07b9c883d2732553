"""npm packages the tests run with Node: pinned, installed with npm into a prefix under
`.cache/` of the checkout (ignored by git) the first time, then reused.

The test workers share the prefix: one installs while the others wait on a lock file
beside it (two npm installs into one prefix at once break each other)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import shutil
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path

__all__ = ["CACHE", "install"]

CACHE = Path(__file__).resolve().parents[1] / ".cache"


def _installed(prefix: Path, name: str) -> str | None:
    manifest = prefix / "node_modules" / name / "package.json"
    if not manifest.exists():
        return None
    version: str = json.loads(manifest.read_text())["version"]
    return version


@contextlib.contextmanager
def _locked(prefix: Path) -> Iterator[None]:
    """Held by one process at a time (across the test workers): `<prefix>.lock`."""
    prefix.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{prefix}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def install(prefix: Path, packages: Mapping[str, str], needed_for: str) -> Path:
    """`prefix`, holding `packages` ({name: version}), installed unless they already are;
    `needed_for` says what for in the error when npm is missing."""
    with _locked(prefix):
        if all(_installed(prefix, n) == v for n, v in packages.items()):
            return prefix
        npm = shutil.which("npm")
        assert npm is not None, f"npm is needed to install {needed_for}"
        prefix.mkdir(parents=True, exist_ok=True)
        pinned = [f"{name}@{version}" for name, version in packages.items()]
        done = subprocess.run(
            [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund",
             "--save-exact", *pinned],
            capture_output=True,
            text=True,
            timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, f"npm install exited {done.returncode}: {done.stderr[-2000:]}"
        installed = {n: _installed(prefix, n) for n in packages}
        assert installed == dict(packages), f"npm installed {installed}, not {dict(packages)}"
    return prefix
