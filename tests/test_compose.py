"""The production image holds every package the install names (no Docker engine runs here,
so the files are read, not built)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_image_copies_every_package_the_install_includes() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    included = project["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = {pattern.rstrip("*") for pattern in included}
    dockerfile = (ROOT / "compose" / "Dockerfile").read_text()
    copied = set(re.findall(r"^COPY (\w+) \./\1$", dockerfile, re.MULTILINE))
    assert packages <= copied, f"compose/Dockerfile does not COPY {sorted(packages - copied)}"
