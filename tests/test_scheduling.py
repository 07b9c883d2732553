"""The workers' units of work under `--dist-by`: a folder below tests/ (or a file) stays
whole on one worker, and the longest units start first."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.scheduling import LONGEST, file_scope, folder_scope

_ROOT = Path(__file__).parent.parent


def test_a_folder_below_tests_is_one_unit_and_a_file_directly_in_tests_is_its_own() -> None:
    assert folder_scope("tests/e2e/test_wordcount.py::test_x[a::b]") == "tests/e2e"
    assert folder_scope("tests/e2e/test_scenarios.py::Class::test_y") == "tests/e2e"
    assert folder_scope("tests/e2e/deeper/test_w.py::test_x") == "tests/e2e"
    assert folder_scope("tests/test_broker.py::test_z") == "tests/test_broker.py"
    assert file_scope("tests/e2e/test_scenarios.py::Class::test_y") == "tests/e2e/test_scenarios.py"


def test_every_long_unit_named_is_a_folder_or_file_of_the_tests() -> None:
    missing = [unit for unit in LONGEST if not (_ROOT / unit).exists()]
    assert not missing, f"tests.scheduling.LONGEST names what is gone: {missing}"


_RECORDING_TEST = """
import os

def test_{index}():
    with open({ran!r}, "a") as ran:
        ran.write("{unit} " + os.environ["PYTEST_XDIST_WORKER"] + "\\n")
"""


def _pytest(tmp_path: Path, *options: str) -> subprocess.CompletedProcess[str]:
    """pytest with `options` on tmp_path/tests, with the hooks its conftest.py takes from
    tests/conftest.py (not the repository's tests: -P keeps tmp_path off sys.path)."""
    command = [sys.executable, "-P", "-m", "pytest", "-q", "-p", "no:cacheprovider", *options]
    return subprocess.run(
        [*command, "--rootdir", str(tmp_path), "-c", "/dev/null", "tests"],
        cwd=tmp_path,
        env={"PYTHONPATH": str(_ROOT), "PATH": str(Path(sys.executable).parent)},
        capture_output=True,
        text=True,
        timeout=120,
    )


def _run(tmp_path: Path, scope: str, units: dict[str, int]) -> list[tuple[str, str]]:
    """Run `units` (a file of tests each, named by their folder/file below tests/) on two
    workers with `--dist-by scope`: the (unit, worker) of each test in the order they ran."""
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "conftest.py").write_text(
        "from tests.conftest import pytest_addoption, pytest_xdist_make_scheduler\n"
    )
    for unit, count in units.items():
        (tests / unit).parent.mkdir(parents=True, exist_ok=True)
        tests_of_unit = (
            _RECORDING_TEST.format(index=i, unit=unit, ran=str(tmp_path / "ran.txt"))
            for i in range(count)
        )
        code = "".join(tests_of_unit)
        (tests / unit).write_text(code)
    run = _pytest(tmp_path, "-n", "2", "--dist-by", scope)
    assert run.returncode == 0, run.stdout + run.stderr
    words = (tmp_path / "ran.txt").read_text().split()
    return list(zip(words[::2], words[1::2], strict=True))


def test_two_workers_run_each_folder_on_one_of_them(tmp_path: Path) -> None:
    units = {f"{folder}/test_{folder}{i}.py": 3 for folder in ("a", "b", "c") for i in range(3)}
    ran = _run(tmp_path, "folder", units)
    workers: dict[str, set[str]] = {}
    for unit, worker in ran:
        workers.setdefault(unit.split("/")[0], set()).add(worker)
    assert len(ran) == 27 and all(len(ran_on) == 1 for ran_on in workers.values()), workers
    assert len({worker for _unit, worker in ran}) == 2, "one worker ran every folder"


def test_the_longest_files_start_first_whatever_their_number_of_tests(tmp_path: Path) -> None:
    longest = [unit.removeprefix("tests/") for unit in LONGEST if unit.endswith(".py")]
    units = {f"test_short_{i}.py": 5 for i in range(4)} | dict.fromkeys(longest[:2], 1)
    ran = _run(tmp_path, "file", units)
    first_of_each_worker = {worker: unit for unit, worker in reversed(ran)}
    assert set(first_of_each_worker.values()) == set(longest[:2]), ran


def test_dist_by_without_workers_is_refused_naming_what_it_needs(tmp_path: Path) -> None:
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "conftest.py").write_text(
        "from tests.conftest import pytest_addoption, pytest_configure\n"
    )
    (tests / "test_one.py").write_text("def test_one():\n    pass\n")
    run = _pytest(tmp_path, "--dist-by", "file")
    assert run.returncode == pytest.ExitCode.USAGE_ERROR, run.stdout + run.stderr
    assert "--dist-by needs -n" in run.stderr
