"""The GraphQL over HTTP audits of the npm package graphql-http, run with Node against a
server: a pinned graphql-http (and its peer graphql) is installed with npm into
`.cache/npm/` of the checkout (ignored by git) the first time, then reused."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from tests import npm

__all__ = ["PACKAGES", "failed_audits", "install", "run_audits"]

PREFIX = npm.CACHE / "npm"
SCRIPT = Path(__file__).with_name("audit.mjs")
PACKAGES = {"graphql-http": "1.23.1", "graphql": "16.15.0"}


def install() -> Path:
    """The npm prefix holding the pinned packages, installed unless they already are."""
    return npm.install(PREFIX, PACKAGES, "graphql-http for the audits")


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
