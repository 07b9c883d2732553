"""One pipeline per checkpoint directory (`pipeline.checkpointlock`): a second one is
refused while the first runs, and the lock ends with the first however it ends."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.checkpointlock import LOCK_NAME, checkpoint_lock
from pipeline.errors import PipelineConfigError

REPO = Path(__file__).resolve().parents[1]
_HOLD = (
    "import sys; from pathlib import Path; from pipeline.checkpointlock import checkpoint_lock\n"
    "with checkpoint_lock(Path(sys.argv[1])):\n"
    "    print('held', flush=True); sys.stdin.read()\n"
)


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process holding the lock of tmp_path/checkpoints."""
    with subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(tmp_path / "checkpoints")],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as process:
        try:
            assert process.stdout is not None and process.stdout.readline() == "held\n"
            yield process
        finally:
            process.kill()
            process.wait(timeout=10)


def test_a_second_pipeline_is_refused_naming_the_first(
    tmp_path: Path, holder: subprocess.Popen[str]
) -> None:
    with pytest.raises(PipelineConfigError) as refused, checkpoint_lock(tmp_path / "checkpoints"):
        pass
    message = str(refused.value)
    assert message.startswith(f"STATEFED_CHECKPOINT_DIR: {tmp_path / 'checkpoints'} is in use")
    assert f"pid {holder.pid} on" in message


def test_the_lock_ends_with_a_killed_holder(tmp_path: Path, holder: subprocess.Popen[str]) -> None:
    holder.kill()
    holder.wait(timeout=10)
    with checkpoint_lock(tmp_path / "checkpoints"):
        said = (tmp_path / "checkpoints" / LOCK_NAME).read_text(encoding="utf-8")
    assert said.startswith("pid ") and f"pid {holder.pid} " not in said


def test_the_directory_is_made_and_taken_again_after_a_clean_end(tmp_path: Path) -> None:
    directory = tmp_path / "new" / "checkpoints"
    with checkpoint_lock(directory):
        assert (directory / LOCK_NAME).exists()
    with checkpoint_lock(directory):  # released on leaving: no process in between
        pass


def test_a_directory_that_cannot_be_made_is_named(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a directory", encoding="utf-8")
    refused = pytest.raises(PipelineConfigError, match=r"^STATEFED_CHECKPOINT_DIR: cannot make")
    with refused, checkpoint_lock(tmp_path / "file" / "checkpoints"):
        pass
