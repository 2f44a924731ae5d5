"""The README's and the docs pages' examples are what the code prints, their links lead somewhere, and
the commands they and the workflow show use options the code has.

Every block of README.md and of ``docs/*.md`` between ``<!-- generated: NAME -->`` markers is
produced again by ``docs/readme_examples.py`` (the same commands on the demo) and compared: every
word and the layout exactly, every number within the script's tolerance (another CPU model may
sample a few other words from the same weights). A failure names the stale example; ``python
docs/readme_examples.py --write`` regenerates it.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[1]


def _examples() -> ModuleType:
    spec = importlib.util.spec_from_file_location("readme_examples", REPO / "docs" / "readme_examples.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


EXAMPLES = _examples()
SHOWN = {name: body for name, (_, body) in EXAMPLES.page_blocks().items()}


def test_every_generated_example_is_shown_once() -> None:
    assert set(SHOWN) == set(EXAMPLES.EXAMPLES)


def test_the_readme_is_a_front_door() -> None:
    """A newcomer reads it in ten minutes; the rest is in docs/, every page of which it links."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 300
    pages = {p.name for p in (REPO / "docs").glob("*.md")}
    assert pages and pages <= set(re.findall(r"\(docs/([\w.-]+\.md)\)", text)), "a docs page the README does not list"
    assert "pytest --model demo" in text and "pytest -n 2" in text  # the quick start and the test command


LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lstrip("#").strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    return {_slug(line) for line in text.splitlines() if line.startswith("#")}


def _links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    return [link for link in LINK.findall(text) if not link.startswith(("http://", "https://", "mailto:"))]


@pytest.mark.parametrize("page", EXAMPLES.PAGES, ids=lambda p: p.name)
def test_every_link_of_a_page_leads_somewhere(page: Path) -> None:
    broken = []
    for link in _links(page):
        path, _, anchor = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        if not target.exists():
            broken.append(f"{link}: no file {target}")
        elif anchor and target.suffix == ".md" and anchor not in _anchors(target):
            broken.append(f"{link}: {target.name} has no heading #{anchor}")
    assert not broken, f"{page.name}: " + "; ".join(broken)


def test_the_link_check_can_fail(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# A title\n\n[ok](#a-title) [gone](missing.md) [x](#no-such)\n")
    assert _links(page) == ["#a-title", "missing.md", "#no-such"]
    assert _anchors(page) == {"a-title"}


def _command_options(text: str) -> set[str]:
    """The options of every ``pytest`` / ``pytest-novelty`` command line in the text's shell blocks."""
    found: set[str] = set()
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            words = line.split()
            while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):  # VAR=value before the command
                words = words[1:]
            if words and words[0] in ("pytest", "pytest-novelty"):
                found |= {w.split("=")[0] for w in words if w.startswith("--")}
    return found


def _cli_options() -> set[str]:
    """Every option string of the command line, its subcommands' and the nested judge commands'."""
    import argparse

    from pytest_novelty.cli import build_parser
    from pytest_novelty.cli.judge import NESTED, nested_parser

    parsers = [build_parser(), *(nested_parser(["judge", name]) for name in NESTED)]
    found: set[str] = set()
    while parsers:
        parser = parsers.pop()
        if parser is None:
            continue
        for action in parser._actions:  # argparse's documented way to list a parser's arguments
            found |= set(action.option_strings)
            if isinstance(action, argparse._SubParsersAction):
                parsers.extend(action.choices.values())
    return found


#: Options of pytest itself and of the plugins the docs show beside ours.
OTHERS = {"--snapshot-update", "--html", "--self-contained-html", "--junitxml", "--rebuild-demo", "--help"}


def test_every_command_a_page_shows_uses_options_the_code_has() -> None:
    from pytest_novelty.pipeline.options import OPTIONS

    ours = {o.long for o in OPTIONS} | {o.short for o in OPTIONS if o.short} | _cli_options() | OTHERS
    unknown = {
        page.name: sorted(used - ours)
        for page in EXAMPLES.PAGES
        if (used := _command_options(page.read_text(encoding="utf-8"))) - ours
    }
    assert not unknown, f"commands with options the code does not have: {unknown}"
    assert _command_options("```bash\nX=1 pytest --bogus=2 \\\n  --model demo\n```") == {"--bogus", "--model"}


def test_the_comparison_catches_a_stale_number_and_a_changed_word() -> None:
    shown = "novelty@5   0.4995  >= 0.3     pass\n"
    assert EXAMPLES.differences(shown, "novelty@5   0.4995  >= 0.3     pass\n") == []
    assert EXAMPLES.differences(shown, "novelty@5   0.5100  >= 0.3     pass\n") == []  # within 0.03
    assert EXAMPLES.differences(shown, "novelty@5   0.3387  >= 0.3     pass\n")  # the stale series example
    assert EXAMPLES.differences(shown, "novelty@5   0.4995  >= 0.3     FAIL\n")


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EXAMPLES.EXAMPLES))
def test_the_example_is_what_the_code_prints(name: str, demo_run_cache: Path) -> None:
    ran = sys.modules["commands"].RAN
    ran.clear()
    produced = EXAMPLES.render(name, demo_run_cache)
    problems = EXAMPLES.differences(SHOWN[name], produced, EXAMPLES.tolerance(name))
    assert not problems, f"README.md example '{name}' is stale (python docs/readme_examples.py --write):\n" + "\n".join(
        problems
    )
    commands = "\n".join(line for line in SHOWN[name].splitlines() if line.startswith(("$ ", "    ")))
    if "$ pytest" in commands:  # an example that shows its commands shows every option they ran with
        options = {arg.split("=")[0] for args in ran for arg in args if arg.startswith("--")}
        missing = sorted(o for o in options if o not in commands)
        assert not missing, f"example '{name}' shows its commands without {', '.join(missing)}"


def test_a_shown_command_reads_back_as_the_arguments_it_ran() -> None:
    """The shown command is the producer's arguments, scratch paths renamed, broken over lines as a
    shell joins them again (an option beside its value)."""
    import shlex

    shown = sys.modules["commands"].shown
    args = ["tail", "agreement", "s.toml", "--model", "noisy=/tmp/x/n", "--reference", "/tmp/x/r.json",
            "--originality", "infini-gram:/c/index", "--plot", "/tmp/x/a plot.png", *(["--model", "demo"] * 4)]
    names = {"/tmp/x/n": "./n", "/tmp/x/r.json": "r.json", "/c/index": "$(pytest-novelty demo path index)"}
    text = shown("pytest-novelty", args, names)
    assert all(len(line) <= 102 for line in text.splitlines()) and text.count("\n") >= 1
    assert "--model \\\n" not in text  # never an option on one line and its value on the next
    words = shlex.split(text.replace("$(pytest-novelty demo path index)", "INDEX").replace("\\\n", " "))
    renamed = [a.replace("/tmp/x/n", "./n").replace("/tmp/x/r.json", "r.json").replace("/c/index", "INDEX")
               for a in args]
    assert words[:2] == ["$", "pytest-novelty"] and words[2:] == renamed


def test_the_workflow_uses_options_the_code_has() -> None:
    from pytest_novelty.pipeline.options import OPTIONS
    from pytest_novelty.plugin.snapshots import NoveltySnapshotExtension

    text = (REPO / ".github" / "workflows" / "gate.yml").read_text(encoding="utf-8")
    ours = {o.long for o in OPTIONS} | {o.short for o in OPTIONS if o.short}
    # The options given to pytest: those of the args=(...) and args+=(...) lines, commented ones too.
    lines = re.findall(r"args\+?=\((.*?)\)", text, re.S)
    assert lines, "gate.yml builds no pytest arguments"
    used = set(re.findall(r"(?<![\w-])(--(?:novelty-)?[a-z][a-z-]+)", " ".join(lines)))
    others = {"--snapshot-update", "--html", "--self-contained-html", "--junitxml", "--upgrade", "--quiet"}
    unknown = sorted(u for u in used if u not in ours and u not in others and not u.startswith("--tb"))
    assert not unknown, f"gate.yml uses options the code does not have: {unknown}"
    folders = set(re.findall(r"__[a-z_]*snapshots__", text))
    assert folders <= {NoveltySnapshotExtension.snapshot_dirname}, folders
