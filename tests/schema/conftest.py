"""The `workdir` fixture: a fresh working directory for catalogue modules of the user's."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.schema.usercatalogue import WorkingDirectory


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[WorkingDirectory]:
    """`tmp_path` as the working directory, not on sys.path (as under the `statefed`
    script); sys.path and the modules imported from it are restored afterwards."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [entry for entry in sys.path if entry not in ("", ".")])
    directory = WorkingDirectory(tmp_path)
    yield directory
    for module in directory.modules:
        for name in [n for n in sys.modules if n == module or module.startswith(f"{n}.")]:
            del sys.modules[name]
