"""The real subscription clients, run with Node against a gateway: graphql-ws, graphql-sse and
Apollo Client's GraphQLWsLink, pinned and installed with npm into `.cache/npm-live/` of the
checkout (ignored by git) the first time, then reused. `run` hands `client.mjs` a plan of
steps and returns what each step received."""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests import npm

__all__ = ["PACKAGES", "Step", "install", "run", "run_script"]

PREFIX = npm.CACHE / "npm-live"
SCRIPT = Path(__file__).with_name("client.mjs")
PACKAGES = {
    "graphql-ws": "6.4.2",
    "graphql-sse": "2.6.1",
    "@apollo/client": "4.3.8",
    "rxjs": "7.8.2",
    "graphql": "16.15.0",
    "ws": "8.23.0",  # Node 20 has no global WebSocket
}


@dataclass(frozen=True)
class Step:
    """One operation of a plan: its `next` payloads are collected until it completes, fails,
    or `take` arrived (then the client stops it, unless `hold`: then it runs on until the
    plan ends); with `until`, it is asked again until its data equals `until` (within the
    runner's deadline). Steps run one after the other."""

    query: str
    variables: dict[str, Any] | None = None
    take: int | None = None
    until: Any = None
    hold: bool = False

    def plan(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "variables": self.variables,
            "take": self.take,
            "until": self.until,
            "hold": self.hold,
        }


def install() -> Path:
    """The npm prefix holding the pinned packages, installed unless they already are."""
    return npm.install(PREFIX, PACKAGES, "the subscription clients")


def run(
    client: str,
    url: str,
    steps: list[Step],
    *,
    token: str | None = None,
    single_connection: bool = False,
) -> dict[str, Any]:
    """What `client` received for each step (`steps`: list of {results, error, completed})
    and the close events of its WebSockets (`closes`)."""
    plan = {
        "client": client,
        "url": url,
        "token": token,
        "singleConnection": single_connection,
        "steps": [s.plan() for s in steps],
    }
    return run_script(SCRIPT, plan, "the subscription clients")


def run_script(script: Path, plan: dict[str, Any], what: str) -> dict[str, Any]:
    """The JSON a Node `script` prints when handed `plan` on stdin and the npm prefix of the
    pinned packages as its argument; `what` says what Node is needed for."""
    node = shutil.which("node")
    assert node is not None, f"Node.js is needed to run {what}"
    done = subprocess.run(
        [node, str(script), str(install())],
        input=json.dumps(plan),
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result
