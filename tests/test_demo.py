"""The demo's example queries answer with the demo's data: the windows they name are
minutes its page views fall in, whenever the demo runs."""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from pathlib import Path

import pytest

from gateway.model.timestamps import parse_utc
from tooling import demodata
from tooling.cli import main
from tooling.demo import _wipe, examples, iso_minute

NOW_MS = 1_795_000_123_456  # any moment: the examples are built from it


def _minute_counts(now_ms: int) -> Counter[int]:
    """Page views per minute start (ms) in the demo's first batch."""
    records = demodata.pageviews(3000, random.Random(1), now_ms)
    times = [json.loads(r.value or b"")["timestamp"] for r in records]
    return Counter(t - t % 60_000 for t in times)


def _named(text: str, argument: str) -> int:
    found = re.search(rf'{argument}: "([^"]+)"', text)
    assert found, f"no {argument} in the examples:\n{text}"
    return int(parse_utc(found.group(1)).timestamp() * 1000)


def test_the_window_the_top_hosts_example_names_holds_demo_page_views() -> None:
    window = _named(examples(NOW_MS), r"window: \{start")
    assert window % 60_000 == 0
    assert _minute_counts(NOW_MS)[window] > 100


def test_the_host_windows_example_starts_before_every_demo_page_view() -> None:
    since = _named(examples(NOW_MS), "from")
    assert since <= min(_minute_counts(NOW_MS))


def test_a_minute_start_is_written_as_windows_start() -> None:
    assert iso_minute(NOW_MS) == "2026-11-18T11:08:00Z"


def test_the_demo_refuses_a_directory_holding_files_it_did_not_write(tmp_path: Path) -> None:
    """It empties its directory at each start: `--dir .` in a project must not delete it."""
    project = tmp_path / "shop"
    project.mkdir()
    (project / "views.py").write_text("VIEWS = ()\n")
    with pytest.raises(SystemExit) as refused:
        main(["demo", "--dir", str(project)])
    assert str(refused.value.code) == (
        f"statefed demo: {project} holds files the demo did not write (views.py), and the "
        "demo empties its directory at each start: name a new or empty one with --dir or "
        "STATEFED_DEMO_DIR"
    )
    assert (project / "views.py").read_text() == "VIEWS = ()\n"


def test_the_demo_refuses_a_file_named_as_its_directory(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("# mine\n")
    with pytest.raises(SystemExit) as refused:
        main(["demo", "--dir", str(readme)])
    assert str(refused.value.code).startswith(
        f"statefed demo: {readme} is a file, and the demo needs a directory"
    )
    assert readme.read_text() == "# mine\n"


def test_an_earlier_demos_directory_or_a_marked_one_is_emptied_and_marked(tmp_path: Path) -> None:
    earlier = tmp_path / "earlier"  # written before demos marked their directory
    (earlier / "checkpoints" / "word_counts").mkdir(parents=True)
    (earlier / "node-n1.log").write_text("log")
    (earlier / "broker.log").write_text("log")
    marked = tmp_path / "marked"
    marked.mkdir()
    (marked / ".statefed-demo").write_text("")
    (marked / "anything").write_text("left by a part of an earlier demo")
    for base in (earlier, marked, tmp_path / "new"):
        _wipe(base)
        assert [e.name for e in base.iterdir()] == [".statefed-demo"]
