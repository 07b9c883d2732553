"""Whether a JVM runs on the class-data archive `make install` wrote for its part
(`runtime.classdata`): a JVM maps an archive it can use, and only then."""

from __future__ import annotations

import os
from pathlib import Path

from runtime.classdata import archive_path
from tooling.config import ToolingConfig


def assert_maps_its_archive(part: str, pid: int) -> None:
    archive = archive_path(part, ToolingConfig.from_env(os.environ).jvm_archives)
    assert archive.is_file(), f"no class-data archive {archive}: run `make jvm-archives`"
    maps = Path(f"/proc/{pid}/maps").read_text()
    mapped = {line.split()[-1] for line in maps.splitlines() if line.endswith(".jsa")}
    assert str(archive) in mapped, (
        f"the {part} JVM (pid {pid}) did not map {archive} (it maps {sorted(mapped)}): written "
        "by another Java or for other jars? Run `make jvm-archives` again"
    )
