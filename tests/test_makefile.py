"""What the Makefile's targets install, read from `make -n` (a dry run: nothing is
installed or fetched): the demo gets the runtime dependencies alone, the tests and checks
the dev extras too, and the Schema Registry the tests run."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.bench.peer_gateways import ROUTER, ROUTER_VERSION
from tooling.registry import REGISTRY_VERSION

ROOT = Path(__file__).resolve().parents[1]


def _plan(target: str, tmp_path: Path) -> list[str]:
    """The commands `make <target>` would run in a checkout with nothing installed yet."""
    if shutil.which("make") is None:
        pytest.fail("make is not on PATH: the Makefile is how a clone is set up")
    # as a top-level make, also when the suite itself runs under `make test`
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    where = [f"VENV={tmp_path}/venv", f"KAFKA_JARS={tmp_path}/kafka"]
    where += [f"REGISTRY_DIR={tmp_path}/registry", f"JVM_ARCHIVES={tmp_path}/jvm"]
    where += [f"ROUTER_DIR={tmp_path}/router"]
    done = subprocess.run(
        ["make", "--no-print-directory", "-n", target, *where],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.splitlines()


def _installs(plan: list[str]) -> list[str]:
    """The plan's package installs, in order (pip's of uv, then uv's)."""
    return [line for line in plan if "pip install" in line]


def _uv_pip(tmp_path: Path) -> str:
    venv = f"{tmp_path}/venv/bin"
    return f"{venv}/uv pip install --quiet --system-certs --python {venv}/python"


def _pinned(name: str) -> str:
    """The version the Makefile pins as `name` (`UV_VERSION`, ...)."""
    pinned = re.search(rf"^{name} := (\S+)$", (ROOT / "Makefile").read_text(), re.M)
    assert pinned is not None, f"the Makefile pins {name}"
    return pinned.group(1)


def test_make_demo_installs_only_the_runtime_dependencies(tmp_path: Path) -> None:
    plan = _plan("demo", tmp_path)
    assert _installs(plan) == [
        f"{tmp_path}/venv/bin/pip install --quiet uv=={_pinned('UV_VERSION')}",
        f"{_uv_pip(tmp_path)} -e .",
    ]
    assert any("dependency:copy-dependencies" in line for line in plan), "Kafka's jars"
    assert any("-m tooling.connector" in line for line in plan), "Spark's connector"
    assert not any("apicurio" in line for line in plan), "the demo does not use a registry yet"
    assert plan[-1] == f"{tmp_path}/venv/bin/statefed demo"
    assert not any("tooling.classdata" in line for line in plan), "no minute of training first"


def test_a_venv_made_before_uv_gets_uv_and_its_packages_again(tmp_path: Path) -> None:
    """A venv whose stamps predate uv (an earlier pip install) is installed again by uv,
    the dev extras too, instead of calling a uv that is not there."""
    venv = tmp_path / "venv"
    venv.mkdir()
    for stamp in (".runtime", ".installed"):
        (venv / stamp).touch()
    assert _installs(_plan("test", tmp_path)) == [
        f"{venv}/bin/pip install --quiet uv=={_pinned('UV_VERSION')}",
        f"{_uv_pip(tmp_path)} -e .",
        f"{_uv_pip(tmp_path)} -e '.[dev]'",
    ]


def test_make_test_and_make_check_install_the_dev_extras(tmp_path: Path) -> None:
    for target in ("test", "check"):
        installs = _installs(_plan(target, tmp_path))
        assert f"{_uv_pip(tmp_path)} -e '.[dev]'" in installs, target


def test_make_install_fetches_the_pinned_schema_registry(tmp_path: Path) -> None:
    plan = _plan("install", tmp_path)
    artifact = f"-Dartifact=io.apicurio:apicurio-registry-app:{REGISTRY_VERSION}:tar.gz:all"
    assert any("dependency:copy " in line and artifact in line for line in plan), plan
    assert any(line.startswith("tar xzf") and f"-C {tmp_path}/registry" in line for line in plan)


def test_the_makefile_and_tooling_registry_pin_the_same_registry() -> None:
    assert _pinned("REGISTRY_VERSION") == REGISTRY_VERSION, "move them together"


def test_make_apollo_router_builds_the_pinned_router_the_bench_runs(tmp_path: Path) -> None:
    """`make bench` asks for Apollo Router (a peer); the Makefile and the bench pin one
    version, built with its locked dependencies where the bench looks for it."""
    assert _pinned("ROUTER_VERSION") == ROUTER_VERSION, "move them together"
    plan = _plan("apollo-router", tmp_path)
    build = f"cargo install apollo-router --version {ROUTER_VERSION} --locked"
    assert any(build in line and f"--root {tmp_path}/router" in line for line in plan), plan
    assert ROUTER == ROOT / ".cache" / "apollo-router" / ROUTER_VERSION / "bin" / "router"


def test_make_install_trains_the_class_data_archives_after_the_parts(tmp_path: Path) -> None:
    plan = _plan("install", tmp_path)
    training = next(i for i, line in enumerate(plan) if "-m tooling.classdata" in line)
    assert training > max(i for i, line in enumerate(plan) if "tar xzf" in line), "the registry"
    assert training > max(i for i, line in enumerate(plan) if "-m tooling.connector" in line)
    assert f"mkdir -p {tmp_path}/jvm" in plan


def test_make_test_makes_the_parts_beside_the_unit_tier_and_before_the_others(
    tmp_path: Path,
) -> None:
    """The unit tier needs the venv alone: `install`'s other parts are made beside it (in
    the background of the same shell line), and waited for before the tiers that use them.
    The dry run itself runs nothing: the line does not name $(MAKE)."""
    plan = _plan("test", tmp_path)
    beside = next(i for i, line in enumerate(plan) if " install > " in line)
    assert plan[beside].rstrip(" \\").endswith("& installing=$!;"), plan[beside]
    unit = next(i for i, line in enumerate(plan) if "pytest -m unit" in line)
    waited = next(i for i, line in enumerate(plan) if "wait $installing" in line)
    parts = next(i for i, line in enumerate(plan) if 'pytest -m "kafka or spark"' in line)
    assert beside < unit < waited < parts, plan
    assert not (tmp_path / "kafka").exists(), "make -n test fetched Kafka's jars"
