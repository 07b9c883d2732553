"""STATEFED_CATALOGUE: a catalogue module in the working directory loads without
PYTHONPATH, and what fails names the module, the setting and the fix."""

from __future__ import annotations

import os
import sys

import pytest

from schema import CATALOGUE, CatalogueError, load_catalogue
from tests.schema.usercatalogue import PLAYS, WorkingDirectory


def test_no_setting_is_the_built_in_catalogue() -> None:
    assert load_catalogue(None) == load_catalogue("") == CATALOGUE


def test_a_module_in_the_working_directory_loads_without_pythonpath(
    workdir: WorkingDirectory,
) -> None:
    workdir.write("myviews", PLAYS)
    (view,) = load_catalogue("myviews:CATALOGUE")
    assert view.name == "song_plays"
    assert load_catalogue("myviews") == (view,), "NAME defaults to CATALOGUE"
    assert sys.path[-1] == os.path.realpath(workdir.path), "after every installed module"
    load_catalogue("myviews")
    assert sys.path.count(sys.path[-1]) == 1


def test_a_package_in_the_working_directory_loads(workdir: WorkingDirectory) -> None:
    workdir.write("views_of_mine.plays", PLAYS.replace("CATALOGUE", "PLAYS"))
    (view,) = load_catalogue("views_of_mine.plays:PLAYS")
    assert view.point_field == "songPlays"


def test_a_missing_module_names_the_setting_the_directory_and_the_fix(
    workdir: WorkingDirectory,
) -> None:
    with pytest.raises(ValueError) as failed:
        load_catalogue("nosuchviews:CATALOGUE")
    message = str(failed.value)
    assert "STATEFED_CATALOGUE='nosuchviews:CATALOGUE'" in message
    assert "no module 'nosuchviews'" in message
    assert f"working directory ({os.getcwd()})" in message
    assert "nosuchviews.py" in message and "PYTHONPATH" in message
    assert isinstance(failed.value.__cause__, ModuleNotFoundError)


def test_a_dependency_the_module_lacks_is_named(workdir: WorkingDirectory) -> None:
    workdir.write("needy", "import not_installed_here\n" + PLAYS)
    with pytest.raises(ValueError, match=r"module 'needy' imports 'not_installed_here'"):
        load_catalogue("needy")


def test_an_error_in_the_module_is_shown_with_its_cause(workdir: WorkingDirectory) -> None:
    workdir.write("broken", PLAYS.replace('"songPlays"', '"song-plays"'))
    with pytest.raises(ValueError, match=r"importing module 'broken' failed: ValueError") as failed:
        load_catalogue("broken")
    assert "song-plays" in str(failed.value)
    assert isinstance(failed.value.__cause__, ValueError)


def test_a_missing_name_names_the_module_file(workdir: WorkingDirectory) -> None:
    path = workdir.write("myviews", PLAYS)
    with pytest.raises(ValueError) as failed:
        load_catalogue("myviews:VIEWS")
    message = str(failed.value)
    assert f"module 'myviews' ({path}) has no 'VIEWS'" in message
    assert "`myviews:NAME`" in message


@pytest.mark.parametrize(
    ("source", "found"),
    [("CATALOGUE = []", "list"), ("CATALOGUE = 3", "int"), ("CATALOGUE = ['view']", "list")],
)
def test_the_name_must_hold_views(workdir: WorkingDirectory, source: str, found: str) -> None:
    workdir.write("odd", source)
    with pytest.raises(ValueError, match=f"non-empty sequence of schema.View, not {found}"):
        load_catalogue("odd")


def test_a_view_named_twice_is_refused(workdir: WorkingDirectory) -> None:
    workdir.write("twice", PLAYS + "CATALOGUE = CATALOGUE * 2\n")
    with pytest.raises(CatalogueError, match="names a view twice") as refused:
        load_catalogue("twice")
    assert refused.value.problem.startswith("names a view twice: ['song_plays'] ")


@pytest.mark.parametrize("spec", ["myviews.py", ":CATALOGUE", ".myviews", "my-views:X", "a:b:c"])
def test_a_malformed_setting_shows_the_expected_form(spec: str) -> None:
    with pytest.raises(ValueError, match=r"expected `package.module:NAME`, e.g. `myviews:"):
        load_catalogue(spec)


def test_views_reading_one_topic_differently_are_refused_when_it_loads(
    workdir: WorkingDirectory,
) -> None:
    longs = """
from schema import KeyType, View, ViewKind

CATALOGUE.append(
    View("song_plays_by_id", "plays", ViewKind.COUNT, "id", "SongIdPlays", "songIdPlays",
         "songIdPlayCounts", "topSongIds", key_type=KeyType.LONG)
)
"""
    workdir.write("mixed", PLAYS + longs)
    with pytest.raises(CatalogueError) as refused:
        load_catalogue("mixed")
    assert refused.value.problem.startswith(
        "views song_plays and song_plays_by_id both read topic 'plays', with other record keys"
    )
