"""`statefed init`'s README names the activation script of the environment statefed runs
in, and gives no `source` line outside a virtual environment (a system or image install)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tooling.scaffold import scaffold


def test_the_readme_activates_statefeds_own_environment(tmp_path: Path) -> None:
    (readme, *_) = [p for p in scaffold(tmp_path / "shop") if p.name == "README.md"]
    assert f"source {Path(sys.prefix) / 'bin' / 'activate'}\npython produce.py" in (
        readme.read_text()
    )


def test_outside_a_virtual_environment_the_readme_has_no_source_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "usr"))  # no bin/activate there
    (readme, *_) = [p for p in scaffold(tmp_path / "shop") if p.name == "README.md"]
    text = readme.read_text()
    assert "source" not in text and "<activate>" not in text
    assert "```sh\npython produce.py\n```" in text
