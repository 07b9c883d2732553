"""The newcomer test: on a fresh clone, `make demo`, then every example the README gives
answers with data.

It runs the real `make demo` in the repository root (in CI the checkout is a fresh clone
whose install steps `make install` already satisfied, so it only starts the system), waits
for the GraphiQL URL the README names, then takes the examples from the README itself:
each ```sh block with a `curl` to the gateway runs as written, as one bash script (as a
newcomer pastes it), each operation of a ```graphql block is sent to the gateway, and the
subscription command streams until a `next` event with data. Every answer must be free of
errors and hold data in each of its root fields. The demo is
stopped by its own handle at the end: Ctrl-C (SIGINT) to its process group, as a newcomer
would, then SIGKILL if it outlives the deadline.

The demo serves fixed places: port 8100 (the README's URLs) and `.statefed/demo` in the
checkout, which it wipes at its start; it cannot run beside another demo.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from graphql import OperationDefinitionNode, OperationType, parse

from tests.newcomer.shell import Block, Output, demo_places, readme_blocks, start, stop
from tooling.processes import wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
START_S = 480.0  # make demo: broker, Spark pipeline, nodes, gateway, the first micro-batch
STOP_S = 120.0  # Ctrl-C until every part the demo started has stopped
ANSWER_S = 60.0  # an example's answer to hold data (the demo's data arrives by the pipeline)
STREAM_S = 60.0  # a subscription's first `next` event with data
SHELL_S = 30.0  # one curl of a query


@dataclass(frozen=True)
class Example:
    """One example of the README: the line it starts on and its text as written."""

    line: int
    text: str

    def __str__(self) -> str:
        return f"README.md line {self.line}:\n{self.text}"


def shell_commands(block: Block) -> list[Example]:
    """A shell block's commands, a line continued with `\\` joined to the next; comments
    and blank lines between commands left out."""
    commands: list[Example] = []
    pending: list[str] = []
    first = 0
    for offset, line in enumerate(block.text.splitlines()):
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        first = first if pending else block.line + offset
        pending.append(line)
        if not line.endswith("\\"):
            commands.append(Example(first, "\n".join(pending)))
            pending = []
    return commands


def operations(block: Block) -> list[tuple[OperationType, Example]]:
    """Each operation of a GraphQL block, as written, with its kind."""
    found: list[tuple[OperationType, Example]] = []
    for definition in parse(block.text).definitions:
        assert isinstance(definition, OperationDefinitionNode) and definition.loc
        start, end = definition.loc.start, definition.loc.end
        line = block.line + block.text.count("\n", 0, start)
        found.append((definition.operation, Example(line, block.text[start:end])))
    return found


def readme_setting(pattern: str) -> str:
    found = re.search(pattern, README_TEXT)
    assert found, f"README.md no longer says {pattern!r}"
    return found.group(1)


README_TEXT = README.read_text(encoding="utf-8")
BLOCKS = readme_blocks(README_TEXT)
GRAPHIQL_URL = readme_setting(r"open GraphiQL at <(http://[^>]+)>")
STREAM_URL = GRAPHIQL_URL.replace(
    urlsplit(GRAPHIQL_URL).path, readme_setting(r"Server-Sent Events at `(/[^`]+)`")
)
_TO_GATEWAY = f":{urlsplit(GRAPHIQL_URL).port}/graphql"


def _to_gateway(command: Example) -> bool:
    return command.text.startswith("curl ") and _TO_GATEWAY in command.text


def _streams(command: Example) -> bool:
    return "text/event-stream" in command.text


CURL_BLOCKS = [
    b for b in BLOCKS if b.lang == "sh" and any(_to_gateway(c) for c in shell_commands(b))
]
QUERY_BLOCKS = [b for b in CURL_BLOCKS if not all(_streams(c) for c in shell_commands(b))]
STREAM_COMMANDS = [
    c for b in CURL_BLOCKS for c in shell_commands(b) if _to_gateway(c) and _streams(c)
]
OPERATIONS = [op for b in BLOCKS if b.lang == "graphql" for op in operations(b)]
SUBSCRIPTIONS = [e for kind, e in OPERATIONS if kind is OperationType.SUBSCRIPTION]
REQUESTS = [e for kind, e in OPERATIONS if kind is not OperationType.SUBSCRIPTION]


def _printed_url(process: subprocess.Popen[str], output: Output) -> str | None:
    for line in list(output.lines):
        if line.startswith("GraphiQL: "):
            return line.removeprefix("GraphiQL: ").strip()
    if process.poll() is not None:
        output.finish()
        pytest.fail(
            f"make demo exited ({process.returncode}) before the GraphiQL URL:\n{output.tail()}"
        )
    return None


@pytest.fixture(scope="module")
def demo() -> Iterator[str]:
    """`make demo`, running until the module's tests are done; the URL it printed."""
    with demo_places(), start(["make", "demo"], ROOT) as process:
        assert process.stdout is not None
        output = Output(process.stdout)
        try:
            url = _wait(
                lambda: _printed_url(process, output),
                START_S,
                lambda: f"make demo to print the GraphiQL URL; its output:\n{output.tail()}",
                1.0,
            )
            assert url == GRAPHIQL_URL, f"the demo serves {url}, the README says {GRAPHIQL_URL}"
            yield url
        finally:
            stopped = stop(process, signal.SIGINT, STOP_S)
            output.finish()
        assert stopped, f"make demo outlived Ctrl-C by {STOP_S} s:\n{output.tail()}"


def _wait(
    condition: Callable[[], Any], timeout_s: float, what: str | Callable[[], str], every: float
) -> Any:
    """`wait_until`, failing the test (with `what` at that moment) at the deadline."""
    try:
        return wait_until(condition, timeout_s, what, every)
    except TimeoutError:
        pytest.fail(what() if callable(what) else what)


def filled(value: Any) -> bool:
    """Whether an answer holds data: a value, a list with some, a connection with edges."""
    if isinstance(value, list):
        return any(filled(item) for item in value)
    if isinstance(value, dict):
        return filled(value["edges"]) if "edges" in value else any(map(filled, value.values()))
    return value is not None and value != ""


def problem(body: Any) -> str | None:
    """What is wrong with a GraphQL answer to an example, or None: it must have no errors
    and data in every root field."""
    if not isinstance(body, dict):
        return "the answer is not a JSON object"
    if body.get("errors"):
        return "the answer has errors"
    data = body.get("data")
    if not isinstance(data, dict) or not data:
        return "the answer has no data"
    empty = [field for field, value in data.items() if not filled(value)]
    return f"no data in {empty}" if empty else None


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def json_objects(text: str) -> list[Any]:
    """The JSON objects printed in `text`, in order (other output left out)."""
    decoder = json.JSONDecoder()
    found, at = [], text.find("{")
    while at != -1:
        try:
            value, end = decoder.raw_decode(text, at)
        except ValueError:
            at = text.find("{", at + 1)
            continue
        found.append(value)
        at = text.find("{", end)
    return found


def run_script(script: str) -> tuple[Any, str]:
    """Run `script` with bash (stopping at a failing command); the answers it printed as
    one answer whose data holds each of theirs (None when one is missing or has errors),
    and its output as text."""
    with start(["bash", "-e", "-o", "pipefail", "-c", script], ROOT) as process:
        try:
            text, _ = process.communicate(timeout=SHELL_S)
        except subprocess.TimeoutExpired:
            stop(process, signal.SIGTERM, 5.0)
            return None, f"(no answer in {SHELL_S} s)"
    answers = json_objects(text)
    if process.returncode != 0 or not answers or any(problem(a) for a in answers):
        return None, f"exit {process.returncode}:\n{text}"
    data = {f"{i}.{field}": v for i, a in enumerate(answers) for field, v in a["data"].items()}
    return {"data": data}, text


def answer_with_data(example: Example, ask: Callable[[], tuple[Any, str]]) -> dict[str, Any]:
    """Ask until the answer holds data (the demo's data arrives by the pipeline); the
    answer, or the test fails naming the example and what came back last."""
    last: tuple[Any, str] = (None, "(nothing)")

    def answered() -> bool:
        nonlocal last
        last = ask()
        return problem(last[0]) is None

    _wait(
        answered,
        ANSWER_S,
        lambda: f"{example}\n{problem(last[0])} after {ANSWER_S} s; last answer:\n{last[1]}",
        1.0,
    )
    return dict(last[0])


def first_data_event(lines: list[str], example: Example) -> dict[str, Any] | None:
    """The first `next` event with data among the lines of an SSE stream so far; a `next`
    event with errors fails the test, naming the example."""
    kind, data = "message", []
    for line in [*lines]:
        if line.startswith("event:"):
            kind = line.removeprefix("event:").strip()
        elif line.startswith("data:"):
            data.append(line.removeprefix("data:").strip())
        elif not line and data:
            body = _json("\n".join(data))
            assert kind != "next" or not (body or {}).get("errors"), (
                f"{example}\nan error event: {body}"
            )
            if kind == "next" and problem(body) is None:
                return dict(body)
            kind, data = "message", []
    return None


@pytest.mark.parametrize("block", QUERY_BLOCKS, ids=lambda b: f"line{b.line}")
def test_readme_curl_commands_answer_with_data(demo: str, block: Block) -> None:
    """A block run as written, as one bash script: every answer it prints holds data."""
    script = Example(block.line, block.text)
    answer_with_data(script, partial(run_script, block.text))


@pytest.mark.parametrize("example", REQUESTS, ids=lambda e: f"line{e.line}")
def test_readme_graphql_operation_answers_with_data(demo: str, example: Example) -> None:
    def ask() -> tuple[Any, str]:
        response = httpx.post(demo, json={"query": example.text}, timeout=SHELL_S)
        return _json(response.text), f"HTTP {response.status_code}: {response.text}"

    answer_with_data(example, ask)


@pytest.mark.parametrize("command", STREAM_COMMANDS, ids=lambda c: f"line{c.line}")
def test_readme_subscription_command_streams_data(demo: str, command: Example) -> None:
    # curl writing to a pipe, not a terminal, shows its progress meter on standard error:
    # each update starts with a carriage return and ends with none, so in one stream the
    # next line of events (`event: next`) would begin after the meter, and not be read
    with start(["bash", "-c", command.text], ROOT, own_stderr=True) as process:
        assert process.stdout is not None and process.stderr is not None
        output, progress = Output(process.stdout), Output(process.stderr)
        try:
            _wait(
                lambda: first_data_event(output.lines, command),
                STREAM_S,
                lambda: (
                    f"{command}\nno `next` event with data in {STREAM_S} s; "
                    f"it printed:\n{output.tail()}\nand on standard error:\n{progress.tail(5)}"
                ),
                0.5,
            )
        finally:
            stop(process, signal.SIGTERM, 10.0)
            output.finish()
            progress.finish()


@pytest.mark.parametrize("example", SUBSCRIPTIONS, ids=lambda e: f"line{e.line}")
def test_readme_graphql_subscription_streams_data(demo: str, example: Example) -> None:
    """Sent over Server-Sent Events, where the README says the gateway serves them."""
    lines: list[str] = []
    deadline = time.monotonic() + STREAM_S
    headers = {"accept": "text/event-stream"}
    timeout = httpx.Timeout(SHELL_S)
    with httpx.stream(
        "POST", STREAM_URL, json={"query": example.text}, headers=headers, timeout=timeout
    ) as response:
        assert response.status_code == 200, f"{example}\nHTTP {response.status_code}"
        for line in response.iter_lines():
            lines.append(line)
            if first_data_event(lines, example) or time.monotonic() > deadline:
                break
    assert first_data_event(lines, example), f"{example}\nno `next` event with data:\n{lines[-40:]}"


def test_the_readme_gives_every_kind_of_example() -> None:
    """Parsing the README found what this module checks (an empty list would run nothing)."""
    assert QUERY_BLOCKS and REQUESTS and STREAM_COMMANDS and SUBSCRIPTIONS
