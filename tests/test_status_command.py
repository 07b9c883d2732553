"""`statefed status` against a real gateway (the gateway app under uvicorn on loopback,
routing from tables the test publishes): the live view read through a pseudo-terminal
follows a change of the partition map and draws restores as progress bars; `--once`
prints one table and exits; a refusal names the token's setting."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from gateway.cluster.pipeline import StatusBoard
from gateway.cluster.routing import RoutingFeed, RoutingTable, build_routing_table
from gateway.config import GatewayConfig
from gateway.edge.app import GatewayApp
from runtime.clock import wall_clock_ms
from schema import MemberRecord, NodeState, PartitionStatus, Role, ViewStatus
from tests.gateway.fakes import WORDS, ServerThread

ROOT = Path(__file__).parents[1]
P = 3
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]|\r")


def record(node_id: str, *partitions: PartitionStatus) -> MemberRecord:
    state = NodeState.RESTORING if any(p.restoring for p in partitions) else NodeState.RUNNING
    return MemberRecord(
        node_id, f"http://{node_id}.test", state, wall_clock_ms(), 60_000, partitions
    )


def table(*records: MemberRecord) -> RoutingTable:
    return build_routing_table({r.node_id: r for r in records}, {WORDS.name: P}, wall_clock_ms())


BEFORE = table(
    record(
        "node-a",
        PartitionStatus(0, Role.ACTIVE, 5, 5),
        PartitionStatus(1, Role.ACTIVE, 7, 9),
        PartitionStatus(2, Role.STANDBY, 1, 40, restoring=True, restore_done=13, restore_total=39),
    ),
    record(
        "node-b", PartitionStatus(2, Role.ACTIVE, 40, 40), PartitionStatus(0, Role.STANDBY, 5, 5)
    ),
)
AFTER = table(  # node-a gone: node-b holds everything
    record(
        "node-b",
        PartitionStatus(0, Role.ACTIVE, 5, 5),
        PartitionStatus(1, Role.ACTIVE, 9, 9),
        PartitionStatus(2, Role.ACTIVE, 40, 40),
    )
)


@contextlib.contextmanager
def gateway(feed: RoutingFeed) -> Iterator[str]:
    """The gateway under uvicorn on loopback, routing from `feed`; its URL."""
    board = StatusBoard()
    board.put(ViewStatus(WORDS.name, 12, wall_clock_ms(), 0, {0: 30, 1: 12}, {}))
    upstream = httpx.AsyncClient()  # no node is called for the status
    app = GatewayApp(
        GatewayConfig(), feed=feed, client=upstream, statuses=board, catalogue=(WORDS,)
    )
    try:
        with ServerThread(app, lifespan="on") as server:
            yield server.url
    finally:
        asyncio.run(upstream.aclose())


def statefed(*args: str) -> list[str]:
    return [sys.executable, "-m", "tooling.cli", *args]


def child_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STATEFED_")}
    return {**env, "PYTHONPATH": str(ROOT), "TERM": "xterm-256color", **extra}


class Terminal:
    """A process on a pseudo-terminal of 120x60, owned by this handle; its screen output
    is kept as text without escape sequences."""

    def __init__(self, command: list[str], env: dict[str, str]) -> None:
        self._master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 60, 120, 0, 0))
        self.process = subprocess.Popen(
            command, stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True
        )
        os.close(slave)
        self._raw = b""
        self.output = ""

    def read_until(self, found: re.Pattern[str], timeout_s: float) -> re.Match[str]:
        """Read the screen until `found` matches what was shown since the last match."""
        deadline = time.monotonic() + timeout_s
        start = len(self.output)
        while True:
            match = found.search(self.output, start)
            if match is not None:
                return match
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"{found.pattern!r} not shown; the screen:\n{self.output}")
            self._read(min(left, 0.2))

    def _read(self, wait_s: float) -> None:
        """What the child wrote, waiting up to `wait_s` for it."""
        ready, _, _ = select.select([self._master], [], [], wait_s)
        if ready:
            try:
                chunk = os.read(self._master, 65536)
            except OSError:  # the child closed the terminal
                chunk = b""
            # decoded whole each time: a read may end inside a character or a sequence
            self._raw += chunk
            self.output = ANSI.sub("", self._raw.decode("utf-8", "replace"))

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            # read on while it stops: a child whose frames filled the terminal's buffer since
            # the last read blocks writing its last one, and never exits
            deadline = time.monotonic() + 30  # a deadline, not a goal: beside whole systems
            while self.process.poll() is None and time.monotonic() < deadline:
                self._read(0.1)
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait(10)
        os.close(self._master)


def rows(text: str) -> list[list[str]]:
    """The cells of every table row in `text` (rich draws cells between │)."""
    return [
        [cell.strip() for cell in line.split("│")[1:-1]]
        for line in text.splitlines()
        if line.count("│") >= 3
    ]


FRAME = re.compile(r"Nodes.*?Pipeline.*?word_counts[^\n]*\n", re.S)  # one whole redraw


def copies_of(frame: str) -> set[tuple[str, str, str]]:
    """(partition, role, node) of every row of the partition map in `frame`."""
    return {(c[0], c[1], c[2]) for c in rows(frame) if len(c) == 5}


def test_the_live_view_shows_the_map_and_follows_its_change() -> None:
    feed = RoutingFeed(BEFORE)
    with gateway(feed) as url:
        terminal = Terminal(statefed("status", "--url", url), child_env())
        try:
            frame = terminal.read_until(FRAME, 30).group()
            cells = rows(frame)
            assert ["node-a", "RESTORING", "yes"] in [c[:3] for c in cells]
            assert copies_of(frame) == {
                ("0", "ACTIVE", "node-a"),
                ("0", "STANDBY", "node-b"),
                ("1", "ACTIVE", "node-a"),
                ("2", "ACTIVE", "node-b"),
                ("2", "STANDBY", "node-a"),
            }, frame
            assert ["1", "ACTIVE", "node-a", "2"] in [c[:4] for c in cells]  # lag 9 - 7
            restoring = next(c for c in cells if c[:3] == ["2", "STANDBY", "node-a"])
            assert restoring[4].endswith("13/39") and "━" in restoring[4]  # its progress bar
            feed.publish(AFTER)
            deadline = time.monotonic() + 30
            wanted = {
                ("0", "ACTIVE", "node-b"),
                ("1", "ACTIVE", "node-b"),
                ("2", "ACTIVE", "node-b"),
            }
            while copies_of(frame) != wanted:  # redrawn until the new map is shown
                assert time.monotonic() < deadline, f"the map did not change:\n{frame}"
                frame = terminal.read_until(FRAME, 30).group()
            assert terminal.process.poll() is None  # live: it runs until interrupted
        finally:
            terminal.close()
        assert terminal.process.returncode == 0  # Ctrl-C ends it quietly


def piped(command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`command` run to its end with its output captured: a pipe, which rich does not take
    for a terminal (unless FORCE_COLOR or TTY_COMPATIBLE say so: they are left out)."""
    forcing = ("FORCE_COLOR", "TTY_COMPATIBLE")
    env = {k: v for k, v in env.items() if k not in forcing}
    return subprocess.run(
        command, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60
    )


def test_once_prints_one_table_and_exits() -> None:
    with gateway(RoutingFeed(BEFORE)) as url:
        done = piped(
            statefed("status", "--once"), child_env(STATEFED_GATEWAY_URL=url, COLUMNS="120")
        )
    assert done.returncode == 0, done.stderr
    cells = rows(done.stdout)
    assert ["node-a", "RESTORING", "yes"] in [c[:3] for c in cells]
    assert ["node-b", "RUNNING", "yes"] in [c[:3] for c in cells]
    assert ["2", "STANDBY", "node-a", "39"] in [c[:4] for c in cells]
    assert ["word_counts", "COUNT", "12"] in [c[:3] for c in cells]
    assert "13/39" in done.stdout


def test_without_a_terminal_it_prints_once_and_exits() -> None:
    # redirected into a pipe or a file, a live view would print nothing until interrupted
    with gateway(RoutingFeed(BEFORE)) as url:
        done = piped(statefed("status", "--url", url), child_env(COLUMNS="120"))
    assert done.returncode == 0, done.stderr
    cells = rows(done.stdout)
    assert ["node-a", "RESTORING", "yes"] in [c[:3] for c in cells]
    assert ["word_counts", "COUNT", "12"] in [c[:3] for c in cells]
    assert len(FRAME.findall(done.stdout)) == 1  # one table, not a redraw


def test_once_names_the_url_setting_when_no_gateway_answers(unused_port: int) -> None:
    done = piped(
        statefed("status", "--once", "--url", f"http://127.0.0.1:{unused_port}"), child_env()
    )
    assert done.returncode == 1
    assert "statefed status: cannot reach" in done.stderr and "STATEFED_GATEWAY_URL" in done.stderr


def test_once_says_when_what_answers_is_no_statefed_gateway(
    unused_port: int, tmp_path: Path
) -> None:
    # a web server of something else at the URL: 200, and a page, not a status
    (tmp_path / "status.json").write_text("<html><body>another server</body></html>")
    command = [sys.executable, "-m", "http.server", str(unused_port), "--bind", "127.0.0.1"]
    server = subprocess.Popen(command, cwd=tmp_path, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{unused_port}"
    try:
        deadline = time.monotonic() + 30
        while True:  # until the server answers
            try:
                httpx.get(url, timeout=1)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the web server did not answer"
                time.sleep(0.05)
        done = piped(statefed("status", "--once", "--url", url), child_env())
    finally:
        server.kill()
        server.wait(10)
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith(f"statefed status: {url}/status.json answered 200 with no ")
    assert "Traceback" not in done.stderr and "STATEFED_GATEWAY_URL" in done.stderr


@pytest.fixture
def unused_port() -> int:
    from tests.gateway.fakes import free_port

    return free_port()
