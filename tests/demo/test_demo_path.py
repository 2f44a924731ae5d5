"""``pytest-novelty demo path`` says where the demo's files lie, for a user who runs another tool on them."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_novelty.cli import main


@pytest.mark.parametrize(("what", "holds"), [(None, "config.json"), ("demo-early", "config.json"),
                                             ("index", None), ("corpus", None)])
def test_demo_path_prints_the_folder_of_each_part(
    demo_assets: Path, capsys: pytest.CaptureFixture[str], what: str | None, holds: str | None
) -> None:
    assert main(["demo", "path", *([what] if what else []), "--cache", str(demo_assets.parent)]) == 0
    printed = Path(capsys.readouterr().out.strip())
    expected = demo_assets / {None: "demo", "corpus": "corpus.jsonl"}.get(what, what or "")
    assert printed == expected and printed.exists()
    if holds:  # a checkpoint folder another tool can load
        assert (printed / holds).is_file()
