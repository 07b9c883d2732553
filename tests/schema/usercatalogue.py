"""A catalogue of the user's own: a module written into a fresh working directory, as a
user writes `myviews.py` where they run `statefed` (the `workdir` fixture, conftest.py)."""

from __future__ import annotations

from pathlib import Path

# one count view of its own, with names the built-in catalogue does not use
PLAYS = """
from schema import View, ViewKind

CATALOGUE = [
    View("song_plays", "plays", ViewKind.COUNT, "song", "SongPlays", "songPlays",
         "songPlayCounts", "topSongs"),
]
"""


class WorkingDirectory:
    """A fresh working directory to write catalogue modules into."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.modules: list[str] = []

    def write(self, module: str, source: str) -> Path:
        """Write `module` (e.g. `myviews`, or `pkg.views` with its package) here."""
        *packages, name = module.split(".")
        folder = self.path.joinpath(*packages)
        folder.mkdir(parents=True, exist_ok=True)
        for depth in range(len(packages)):
            self.path.joinpath(*packages[: depth + 1], "__init__.py").touch()
        self.modules.append(module)
        path = folder / f"{name}.py"
        path.write_text(source, encoding="utf-8")
        return path
