"""npm packages the tests run with Node: pinned, installed with npm into a prefix under
`.cache/` of the checkout (ignored by git) the first time, then reused."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

__all__ = ["CACHE", "install"]

CACHE = Path(__file__).resolve().parents[1] / ".cache"


def _installed(prefix: Path, name: str) -> str | None:
    manifest = prefix / "node_modules" / name / "package.json"
    if not manifest.exists():
        return None
    version: str = json.loads(manifest.read_text())["version"]
    return version


def install(prefix: Path, packages: Mapping[str, str], needed_for: str) -> Path:
    """`prefix`, holding `packages` ({name: version}), installed unless they already are;
    `needed_for` says what for in the error when npm is missing."""
    if all(_installed(prefix, n) == v for n, v in packages.items()):
        return prefix
    npm = shutil.which("npm")
    assert npm is not None, f"npm is needed to install {needed_for}"
    prefix.mkdir(parents=True, exist_ok=True)
    pinned = [f"{name}@{version}" for name, version in packages.items()]
    subprocess.run(
        [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund", "--save-exact",
         *pinned],
        check=True,
        capture_output=True,
        timeout=300,
    )  # fmt: skip
    installed = {n: _installed(prefix, n) for n in packages}
    assert installed == dict(packages), f"npm installed {installed}, not {dict(packages)}"
    return prefix
