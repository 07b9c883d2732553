"""The catalogue a setting names: STATEFED_CATALOGUE=`package.module:NAME`, a sequence of
`View` in a module of the user's.

The module is imported from the working directory or the Python path, so a `myviews.py`
in the directory `statefed` runs in needs no PYTHONPATH. Every part imports it this way:
nodes, gateway and the pipeline's driver (under spark-submit, the directory it runs in).
The pipeline's executors never import it: its plans are Spark expressions, and its
foreachBatch writers run on the driver. Here, where every part's catalogue passes, the
views' GraphQL names are checked against each other (`schema.names`), so that a clash is
refused at start rather than making a broken schema, and so are the ways views of one
topic read it (`schema.sharedtopics`).
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from collections import Counter
from collections.abc import Sequence
from types import ModuleType

from schema.names import check_catalogue
from schema.sharedtopics import check_shared_topics
from schema.views import CATALOGUE, View

__all__ = ["CatalogueError", "load_catalogue"]

_SETTING = "STATEFED_CATALOGUE"
_SPEC = re.compile(r"^(?P<module>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)(?::(?P<name>[A-Za-z_]\w*))?$")


class CatalogueError(ValueError):
    """STATEFED_CATALOGUE names no catalogue that loads: `spec` is what it said, `problem`
    what is wrong with it and how to fix that."""

    def __init__(self, spec: str, problem: str) -> None:
        super().__init__(f"{_SETTING}={spec!r}: {problem}")
        self.spec = spec
        self.problem = problem


def load_catalogue(spec: str | None) -> tuple[View, ...]:
    """The catalogue named by `spec` (`package.module:NAME`, NAME defaulting to CATALOGUE),
    or the built-in one when `spec` is empty: operators declare their own views without
    changing statefed. Raises CatalogueError naming the module and the fix."""
    if not spec:
        return CATALOGUE
    match = _SPEC.match(spec)
    # `myviews.py:CATALOGUE` names the file, not the module (a submodule `py` of `myviews`)
    if match is None or match["module"].endswith(".py"):
        raise CatalogueError(
            spec,
            "expected `package.module:NAME`, e.g. `myviews:CATALOGUE` "
            "for a sequence of schema.View named CATALOGUE in myviews.py",
        )
    module_name, name = match["module"], match["name"] or "CATALOGUE"
    module = _import(spec, module_name)
    where = f"module {module_name!r} ({module.__file__})"
    if not hasattr(module, name):
        raise CatalogueError(
            spec,
            f"{where} has no {name!r}: define it as a sequence of "
            f"schema.View, or name the one it has as `{module_name}:NAME`",
        )
    value = getattr(module, name)
    catalogue = tuple(value) if isinstance(value, Sequence) else ()
    if not catalogue or not all(isinstance(view, View) for view in catalogue):
        raise CatalogueError(
            spec,
            f"{name} of {where} must be a non-empty sequence of "
            f"schema.View, not {type(value).__name__}",
        )
    names = Counter(view.name for view in catalogue)
    twice = sorted(name for name, count in names.items() if count > 1)
    if twice:
        raise CatalogueError(
            spec, f"names a view twice: {twice} (each view needs a name of its own)"
        )
    try:
        check_catalogue(catalogue)  # two views' GraphQL names clash: no schema can be built
        check_shared_topics(catalogue)  # two views read one topic's records differently
    except ValueError as exc:
        raise CatalogueError(spec, str(exc)) from exc
    return catalogue


def _import(spec: str, module_name: str) -> ModuleType:
    _search_working_directory()
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if module_name == missing or module_name.startswith(f"{missing}."):
            path = module_name.replace(".", os.sep) + ".py"
            raise CatalogueError(
                spec,
                f"no module {module_name!r} in the working directory "
                f"({os.getcwd()}) or on the Python path: run statefed in the directory that "
                f"holds {path}, or add that directory to PYTHONPATH (for every part: "
                f"pipeline, nodes and gateway)",
            ) from exc
        raise CatalogueError(
            spec,
            f"module {module_name!r} imports {missing!r}, which is not "
            f"installed: install it where statefed runs",
        ) from exc
    except Exception as exc:  # the user's code: a syntax error, a View it declares wrongly
        raise CatalogueError(
            spec, f"importing module {module_name!r} failed: {type(exc).__name__}: {exc}"
        ) from exc


def _search_working_directory() -> None:
    """Put the working directory on sys.path unless it is there (`python -m` puts it
    first; the `statefed` script and spark-submit's Python do not). Last, so a file there
    never shadows an installed module; kept, as the module may import its neighbours
    later."""
    here = os.path.realpath(os.getcwd())
    if all(os.path.realpath(entry or os.curdir) != here for entry in sys.path):
        sys.path.append(here)
