"""`statefed schema`: the SDL (and possibleTypes map) of the catalogue STATEFED_CATALOGUE or
--catalogue names, printed or written; without one, the built-in catalogue's, which
`make schema` commits."""

from __future__ import annotations

import orjson
import pytest

from gateway.api.schema import print_sdl
from tests.schema.usercatalogue import PLAYS, WorkingDirectory
from tooling.cli import main

BUILT_IN_FIELDS = ("wordCount(", "topWords(", "bookingHistory(")


def test_prints_the_gateway_sdl_of_a_catalogue_of_your_own(
    workdir: WorkingDirectory, capsys: pytest.CaptureFixture[str]
) -> None:
    workdir.write("myviews", PLAYS)
    main(["schema", "--catalogue", "myviews:CATALOGUE"])
    sdl = capsys.readouterr().out
    assert "  songPlays(" in sdl and "union _Entity = SongPlays" in sdl
    assert not [field for field in BUILT_IN_FIELDS if field in sdl]


def test_honours_the_environment_and_prints_the_node_sdl(
    workdir: WorkingDirectory,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    workdir.write("myviews", PLAYS)
    monkeypatch.setenv("STATEFED_CATALOGUE", "myviews")
    main(["schema", "--node"])
    sdl = capsys.readouterr().out
    assert "  songPlays(song: String!): SongPlays" in sdl
    assert not [field for field in BUILT_IN_FIELDS if field in sdl]


def test_writes_the_sdl_and_possible_types_into_a_directory(
    workdir: WorkingDirectory, capsys: pytest.CaptureFixture[str]
) -> None:
    workdir.write("myviews", PLAYS)
    out = workdir.path / "schema"
    out.mkdir()
    main(["schema", "--catalogue", "myviews", "--out", str(out)])
    assert sorted(path.name for path in out.iterdir()) == ["gateway.graphql", "possibleTypes.json"]
    assert "  songPlays(" in (out / "gateway.graphql").read_text()
    assert orjson.loads((out / "possibleTypes.json").read_bytes()) == {"_Entity": ["SongPlays"]}
    assert f"wrote {out / 'gateway.graphql'}" in capsys.readouterr().err
    main(["schema", "--catalogue", "myviews", "--node", "--out", str(out / "mine.graphql")])
    assert "  songPlays(song: String!)" in (out / "mine.graphql").read_text()


def test_a_directory_named_with_a_trailing_slash_is_made_and_written_into(
    workdir: WorkingDirectory,
) -> None:
    """`--out graphql/` as docs/views.md writes it, before the directory exists: not a file
    named graphql."""
    workdir.write("myviews", PLAYS)
    out = workdir.path / "graphql"
    main(["schema", "--catalogue", "myviews", "--out", f"{out}/"])
    assert sorted(path.name for path in out.iterdir()) == ["gateway.graphql", "possibleTypes.json"]


def test_without_a_catalogue_it_prints_the_built_in_sdl(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("STATEFED_CATALOGUE", raising=False)
    main(["schema"])
    assert capsys.readouterr().out == print_sdl()


def test_a_catalogue_it_cannot_import_is_named(workdir: WorkingDirectory) -> None:
    with pytest.raises(SystemExit, match=r"^statefed schema: --catalogue 'theirviews': no module"):
        main(["schema", "--catalogue", "theirviews"])


def test_an_unwritable_out_is_named(workdir: WorkingDirectory) -> None:
    workdir.write("myviews", PLAYS)
    out = workdir.path / "missing" / "gateway.graphql"
    with pytest.raises(SystemExit, match=f"statefed schema: cannot write {out}"):
        main(["schema", "--catalogue", "myviews", "--out", str(out)])


def test_breaking_with_out_is_refused_rather_than_writing_nothing(
    workdir: WorkingDirectory, capsys: pytest.CaptureFixture[str]
) -> None:
    out = workdir.path / "graphql"
    with pytest.raises(SystemExit) as refused:
        main(["schema", "--breaking", "schema/gateway.graphql", "--out", f"{out}/"])
    assert refused.value.code == 2  # a usage error, not "a breaking change" (1)
    assert capsys.readouterr().err.startswith(
        "statefed schema: --breaking compares and writes nothing"
    )
    assert not out.exists()


@pytest.mark.parametrize(
    ("baseline", "said"),
    [
        ("type Query { a: Foo }\n", "holds no valid GraphQL SDL: "),  # a type never defined
        ("this is not SDL\n", "holds no valid GraphQL SDL: Syntax Error"),
        (None, "cannot read "),
    ],
)
def test_a_baseline_that_is_no_sdl_exits_2_not_as_a_breaking_change(
    workdir: WorkingDirectory,
    capsys: pytest.CaptureFixture[str],
    baseline: str | None,
    said: str,
) -> None:
    path = workdir.path / "old.graphql"
    if baseline is not None:
        path.write_text(baseline)
    with pytest.raises(SystemExit) as refused:
        main(["schema", "--breaking", str(path)])
    assert refused.value.code == 2  # CI tells it from a breaking change (1)
    err = capsys.readouterr().err
    assert err.startswith("statefed schema: ") and said in err and str(path) in err
