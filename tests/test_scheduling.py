"""The workers' unit of work under `--dist-by-folder`: a folder below tests/ stays whole."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.scheduling import folder_scope

_ROOT = Path(__file__).parent.parent


def test_a_folder_below_tests_is_one_unit_and_a_file_directly_in_tests_is_its_own() -> None:
    assert folder_scope("tests/e2e/test_wordcount.py::test_x[a::b]") == "tests/e2e"
    assert folder_scope("tests/e2e/test_scenarios.py::Class::test_y") == "tests/e2e"
    assert folder_scope("tests/test_broker.py::test_z") == "tests/test_broker.py"


_RECORDING_TEST = """
import os
from pathlib import Path

def test_{name}():
    with (Path(__file__).parent.parent / "ran.txt").open("a") as ran:
        ran.write(f"{folder} {{os.environ['PYTEST_XDIST_WORKER']}}\\n")
"""


def test_two_workers_run_each_folder_on_one_of_them(tmp_path: Path) -> None:
    tests = tmp_path / "tests"
    (tests / "a").mkdir(parents=True)
    (tests / "b").mkdir()
    (tests / "conftest.py").write_text(
        "from tests.conftest import pytest_addoption, pytest_xdist_make_scheduler\n"
    )
    for folder in ("a", "b"):
        for index in range(4):
            name = f"{folder}{index}"
            test = _RECORDING_TEST.format(name=name, folder=folder)
            (tests / folder / f"test_{name}.py").write_text(test)
    command = [sys.executable, "-P", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2"]
    run = subprocess.run(
        [*command, "--dist-by-folder", "--rootdir", str(tmp_path), "-c", "/dev/null", "tests"],
        cwd=tmp_path,
        env={"PYTHONPATH": str(_ROOT), "PATH": str(Path(sys.executable).parent)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    lines = (tests / "ran.txt").read_text().split()
    workers: dict[str, set[str]] = {}
    for folder, worker in zip(lines[::2], lines[1::2], strict=True):
        workers.setdefault(folder, set()).add(worker)
    assert len(lines) == 16 and all(len(ran_on) == 1 for ran_on in workers.values()), workers
