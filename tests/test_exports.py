"""Each package's public surface is exactly what its `__all__` claims."""

from __future__ import annotations

import importlib
import inspect

import pytest

PACKAGES = ["schema", "runtime", "node", "gateway", "pipeline", "tooling"]


@pytest.mark.parametrize("name", PACKAGES)
def test_exports_resolve_and_are_listed_once(name: str) -> None:
    package = importlib.import_module(name)
    assert len(set(package.__all__)) == len(package.__all__)
    for export in package.__all__:
        assert hasattr(package, export), f"{name}.__all__ names {export}, which it lacks"


@pytest.mark.parametrize("name", PACKAGES)
def test_every_public_function_and_class_is_listed(name: str) -> None:
    package = importlib.import_module(name)
    public = {
        n
        for n, value in vars(package).items()
        if not n.startswith("_") and (inspect.isclass(value) or inspect.isfunction(value))
    }
    assert public <= set(package.__all__), f"{name} exposes {public - set(package.__all__)}"
