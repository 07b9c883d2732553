"""Faults of the LevelDB partition store on real files: damage found at open, a full disk.

Damage is done while the store is closed, as an operator or a failing disk would: a file
truncated or removed. After a clean close the seal names every file's size; after a crash
there is none, and LevelDB's own checks plus the table sizes must do. The full disk is a
real tmpfs the test mounts and fills (tests.node.disks).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from node.errors import DiskFullError, StoreDamagedError, StoreWriteError
from node.storage.store import SEAL, ChangeBatch, LevelDBStore
from schema import CountRow
from tests.node.disks import fill, small_disk


def write_batches(store: LevelDBStore, first: int, count: int, keys: int = 2000) -> None:
    """`count` batches of `keys` count rows each, numbered from `first`; offset = rows."""
    for number in range(first, first + count):
        change = ChangeBatch()
        for i in range(keys):
            change.put_count("words", CountRow(f"k{i:05d}", number, 0))
        change.advance("t.changelog", (number + 1) * keys)
        store.apply(change)


def store_with_files(path: Path, reopens: int = 1) -> None:
    """A store closed cleanly after `reopens` + 1 sessions: a log, tables, a MANIFEST."""
    for session in range(reopens + 1):
        with LevelDBStore(path, cache_mb=1) as store:
            write_batches(store, session * 10, 10)


def truncated(pattern: str) -> Callable[[Path], str]:
    """Damage: cut the first file matching `pattern` to half its size; returns its name."""

    def damage(path: Path) -> str:
        file = sorted(path.glob(pattern))[0]
        os.truncate(file, file.stat().st_size // 2)
        return file.name

    return damage


def removed(pattern: str) -> Callable[[Path], str]:
    """Damage: remove the first file matching `pattern`; returns its name."""

    def damage(path: Path) -> str:
        file = sorted(path.glob(pattern))[0]
        file.unlink()
        return file.name

    return damage


DAMAGE = {
    "truncated log": truncated("*.log"),
    "removed log": removed("*.log"),
    "truncated table": truncated("*.ldb"),
    "removed table": removed("*.ldb"),
    "truncated MANIFEST": truncated("MANIFEST-*"),
    "removed MANIFEST": removed("MANIFEST-*"),
    "removed CURRENT": removed("CURRENT"),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_file_damaged_after_a_clean_close_is_found_at_open_and_set_aside(
    tmp_path: Path, damage: str
) -> None:
    path = tmp_path / "partition-3"
    store_with_files(path)
    assert (path / SEAL).is_file()
    damaged_file = DAMAGE[damage](path)

    store = LevelDBStore(path, cache_mb=1)
    with pytest.raises(StoreDamagedError, match=f"{path} is damaged: .*{damaged_file}"):
        store.open()
    assert store.closed
    moved_to = Path(store.set_aside())
    # kept for inspection next to where it was, the damage as it was found
    assert moved_to.parent == tmp_path and moved_to.name.startswith("partition-3.damaged-")
    assert not path.exists()
    assert (damaged_file in os.listdir(moved_to)) == damage.startswith("truncated")
    with store:  # opens empty, to be rebuilt from the changelog
        assert store.offsets() == {}
        assert store.get("words", "k00001") is None


@pytest.mark.parametrize("damage", ["truncated table", "removed table", "removed CURRENT"])
def test_a_damaged_file_is_found_without_a_seal_too(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "partition-0"
    store_with_files(path)
    (path / SEAL).unlink()  # as after a crash: no clean close
    DAMAGE[damage](path)
    with pytest.raises(StoreDamagedError, match="is damaged"):
        LevelDBStore(path, cache_mb=1).open()


def test_an_intact_store_opens_with_its_data_and_a_lost_info_log_is_harmless(
    tmp_path: Path,
) -> None:
    path = tmp_path / "partition-0"
    store_with_files(path)
    (path / "LOG").unlink()  # LevelDB's human-readable info log, not data
    with LevelDBStore(path, cache_mb=1) as store:
        assert not (path / SEAL).exists()  # checked, and only valid until the next open
        assert store.offsets() == {"t.changelog": 20 * 2000}
        assert store.get("words", "k01999") == CountRow("k01999", 19, 0)
    assert (path / SEAL).is_file()


@pytest.mark.parametrize("leave_bytes", [0, 20_000], ids=["no byte left", "a few bytes left"])
def test_a_write_on_a_full_disk_fails_whole_and_the_store_resumes_after_space_returns(
    tmp_path: Path, leave_bytes: int
) -> None:
    with small_disk(tmp_path / "disk", 4) as disk:
        store = LevelDBStore(disk / "partition-0", cache_mb=1)
        with store:
            write_batches(store, 0, 2, keys=300)
            filler = fill(disk, leave_bytes)
            with pytest.raises(DiskFullError, match=r"^disk full: .*partition-0 \(\d+ bytes free"):
                write_batches(store, 2, 20, keys=300)
            # nothing of the failed batch: still readable, rows and offsets as before it
            assert store.offsets()["t.changelog"] in range(2 * 300, 22 * 300, 300)
            before = store.offsets()["t.changelog"] // 300 - 1
            assert store.get("words", "k00299") == CountRow("k00299", before, 0)
            # LevelDB's log may now end in a partial record: no more writes on this handle
            with pytest.raises(StoreWriteError, match="reopen"):
                write_batches(store, 30, 1, keys=300)
            assert not store.room_to_write()

            filler.unlink()
            assert store.room_to_write()
            store.reopen()
            write_batches(store, before + 1, 3, keys=300)
        with store:  # reopens cleanly, exactly as written
            assert store.offsets() == {"t.changelog": (before + 4) * 300}
            rows = store.get_many("words", [f"k{i:05d}" for i in range(300)])
            assert rows == [CountRow(f"k{i:05d}", before + 3, 0) for i in range(300)]


def rotten_blocks(path: Path) -> str:
    """Damage a disk can do without changing a size: a byte flipped every 512 bytes of
    every table's data (its index and footer, the last 10%, left whole), so reading any of
    its blocks fails LevelDB's checksum."""
    names = []
    for table in sorted(path.glob("*.ldb")):
        data = bytearray(table.read_bytes())
        for at in range(0, len(data) * 9 // 10, 512):
            data[at] ^= 0xFF
        table.write_bytes(bytes(data))
        names.append(table.name)
    return ", ".join(names)


def test_a_table_block_failing_its_checksum_is_damage_found_at_open_and_set_aside(
    tmp_path: Path,
) -> None:
    """Sizes, seal and log intact: the first read of the store's own keys at open finds the
    damage, which must be StoreDamagedError (moved aside, rebuilt), not LevelDB's own error,
    which stopped the node."""
    path = tmp_path / "partition-5"
    store_with_files(path)
    (path / SEAL).unlink()  # the seal would not vouch for changed bytes either way
    rotten_blocks(path)
    store = LevelDBStore(path, cache_mb=1)
    with pytest.raises(StoreDamagedError, match=f"{path} is damaged: .*[Cc]orrupt"):
        store.open()
    assert store.closed
    store.set_aside()
    with store:
        assert store.offsets() == {}
