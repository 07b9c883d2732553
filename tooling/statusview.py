"""`statefed status`: the gateway's `/status.json` as a live terminal view (rich), or as
one printed table with `--once` or when its output is not a terminal.

The view shows the same as the gateway's `/status` page: nodes, the partition map (each
partition's ACTIVE and STANDBY copies, lag, a progress bar while a copy restores), the
pipeline's progress per view and the dead letters.
"""

from __future__ import annotations

import signal
import threading
from typing import Any

import httpx
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from runtime.signals import set_from_handler

__all__ = ["StatusUnavailable", "fetch_status", "show_status", "status_view"]

_STATUS_JSON = "/status.json"
_TIMEOUT_S = 5.0


class StatusUnavailable(Exception):
    """The gateway's status could not be read: the message says why and what to set."""


def fetch_status(client: httpx.Client, url: str, token: str | None) -> dict[str, Any]:
    """GET `url`/status.json with `token` as bearer token (None: none sent)."""
    target = url.rstrip("/") + _STATUS_JSON
    headers = {"accept": "application/json"}
    if token:
        headers["authorization"] = f"Bearer {token}"
    try:
        response = client.get(target, headers=headers)
    except httpx.HTTPError as exc:
        raise StatusUnavailable(
            f"cannot reach {target} ({exc}): is the gateway running there? "
            "Set --url or STATEFED_GATEWAY_URL"
        ) from exc
    if response.status_code in (401, 403):
        raise StatusUnavailable(
            f"{target} answered {response.status_code}: {_message(response)}; pass a token "
            "with the operator scope as --token or STATEFED_GATEWAY_TOKEN"
        )
    if response.status_code != 200:
        raise StatusUnavailable(f"{target} answered {response.status_code}: {_message(response)}")
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict) or "nodes" not in body:
        raise StatusUnavailable(
            f"{target} answered 200 with no statefed status ({response.text[:100]!r}): is a "
            "statefed gateway there? Set --url or STATEFED_GATEWAY_URL"
        )
    return body


def _message(response: httpx.Response) -> str:
    try:
        return str(response.json()["errors"][0]["message"])
    except (ValueError, KeyError, IndexError, TypeError):
        return response.text[:200]


def status_view(body: dict[str, Any]) -> Group:
    """The tables of one status: nodes, partition map, pipeline, dead letters."""
    parts: list[RenderableType] = [_nodes(body), _partitions(body), _views(body)]
    dead = body["dead_letters"]
    parts.append(Text(f"dead letters: {dead['total']} input record(s) rejected"))
    for letter in dead["recent"][:3]:
        parts.append(Text(f"  {letter.get('topic')}: {letter.get('reason')}"))
    if body["routing_stale_since_ms"] is not None:
        parts.append(Text("membership is stalled: the broker does not answer", style="red"))
    return Group(*parts)


def _nodes(body: dict[str, Any]) -> Table:
    table = Table("node", "state", "alive", "heartbeat age", "active", "standby", title="Nodes")
    for node in body["nodes"]:
        liveness = _liveness(node)
        table.add_row(
            node["id"],
            node["state"],
            liveness,
            f"{node['heartbeat_age_ms'] / 1000:.1f} s",
            " ".join(map(str, node["active"])),
            " ".join(map(str, node["standby"])),
            style=None if liveness == "yes" else "red",
        )
    return table


def _liveness(node: dict[str, Any]) -> str:
    """yes, NO, or "suspect": alive, but not asked (missed heartbeats or calls left without
    an answer; a gateway older than the field reports no suspicion)."""
    if not node["alive"]:
        return "NO"
    return "suspect" if node.get("suspect") else "yes"


def _partitions(body: dict[str, Any]) -> Table:
    title = f"Partition map (routing version {body['routing_version']})"
    table = Table("partition", "role", "node", "lag", "restore", title=title)
    for entry in body["partitions"]:
        if not entry["copies"]:
            table.add_row(str(entry["partition"]), "-", "unassigned", "", "", style="red")
        for copy in sorted(entry["copies"], key=lambda c: (c["role"] != "ACTIVE", c["node"])):
            table.add_row(
                str(entry["partition"]),
                copy["role"],
                copy["node"],
                str(copy["lag"]),
                _restore(copy),
            )
    return table


def _restore(copy: dict[str, Any]) -> RenderableType:
    if not copy["restoring"]:
        return ""
    total, done = copy["restore_total"], copy["restore_done"]
    if total <= 0:
        return Text(f"restoring {done}/?")
    cell = Table.grid(padding=(0, 1))
    cell.add_row(ProgressBar(total=total, completed=done, width=20), f"{done}/{total}")
    return cell


def _views(body: dict[str, Any]) -> Table:
    table = Table("view", "kind", "batch", "reported", "input offsets", "late", title="Pipeline")
    for view in body["views"]:
        age = view["updated_age_ms"]
        table.add_row(
            view["name"],
            view["kind"],
            "-" if view["batch_id"] is None else str(view["batch_id"]),
            "never" if age is None else f"{age / 1000:.1f} s ago",
            str(view["source_offsets"]),
            str(view["late_dropped"]),
        )
    return table


def show_status(
    url: str, token: str | None, *, once: bool, console: Console, interval_s: float = 1.0
) -> None:
    """Print one status (`once`, or when `console` is not a terminal: redrawn into a pipe
    or a file, a live view would show nothing until interrupted), or redraw it every
    `interval_s` until interrupted; a failed read is shown in the live view and tried
    again."""
    with httpx.Client(timeout=_TIMEOUT_S) as client:
        if once or not console.is_terminal:
            console.print(status_view(fetch_status(client, url, token)))
            return
        # Ctrl-C ends the loop between two reads: raised as KeyboardInterrupt inside the
        # HTTP client or a redraw, it could leave either half done and the exit stuck
        interrupted = threading.Event()
        previous = signal.signal(signal.SIGINT, lambda *_: set_from_handler(interrupted))
        try:
            with Live(Text(f"reading {url} ..."), console=console, auto_refresh=False) as live:
                while not interrupted.is_set():
                    try:
                        view: RenderableType = status_view(fetch_status(client, url, token))
                    except StatusUnavailable as exc:
                        view = Text(str(exc), style="red")
                    live.update(view, refresh=True)
                    interrupted.wait(interval_s)  # the view's refresh period, or Ctrl-C
        finally:
            signal.signal(signal.SIGINT, previous)
