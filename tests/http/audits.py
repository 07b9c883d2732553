"""The GraphQL over HTTP audits of the npm package graphql-http, run with Node against a
server: a pinned graphql-http (and its peer graphql) is installed with npm into
`.cache/npm/` of the checkout (ignored by git) the first time, then reused."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

__all__ = ["PACKAGES", "failed_audits", "install", "run_audits"]

REPO = Path(__file__).resolve().parents[2]
PREFIX = REPO / ".cache" / "npm"
SCRIPT = Path(__file__).with_name("audit.mjs")
PACKAGES = {"graphql-http": "1.23.1", "graphql": "16.15.0"}


def _installed(name: str) -> str | None:
    manifest = PREFIX / "node_modules" / name / "package.json"
    if not manifest.exists():
        return None
    version: str = json.loads(manifest.read_text())["version"]
    return version


def install() -> Path:
    """The npm prefix holding the pinned packages, installed unless they already are."""
    if all(_installed(n) == v for n, v in PACKAGES.items()):
        return PREFIX
    npm = shutil.which("npm")
    assert npm is not None, "npm is needed to install graphql-http for the audits"
    PREFIX.mkdir(parents=True, exist_ok=True)
    pinned = [f"{name}@{version}" for name, version in PACKAGES.items()]
    subprocess.run(
        [npm, "install", "--prefix", str(PREFIX), "--no-audit", "--no-fund", "--save-exact",
         *pinned],
        check=True,
        capture_output=True,
        timeout=300,
    )  # fmt: skip
    installed = {n: _installed(n) for n in PACKAGES}
    assert installed == PACKAGES, f"npm installed {installed}, not {PACKAGES}"
    return PREFIX


def run_audits(url: str) -> list[dict[str, Any]]:
    """Every audit's result against the GraphQL endpoint at `url`."""
    node = shutil.which("node")
    assert node is not None, "Node.js is needed to run the graphql-http audits"
    done = subprocess.run(
        [node, str(SCRIPT), url, str(install())],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    results: list[dict[str, Any]] = json.loads(done.stdout)["results"]
    return results


def failed_audits(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Failed MUSTs (error), failed SHOULDs (warn) and audits that could not run (fatal);
    a MAY not done (notice) is allowed."""
    return [r for r in results if r["status"] not in ("ok", "notice")]
