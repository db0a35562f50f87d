"""Every `hs ...` command shown in the README and docs/guide.md (in code blocks and inline code)
exists: its `--help` succeeds."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.main import app

REPO = Path(__file__).resolve().parents[2]
DOCS = ("README.md", "docs/guide.md")
_WORD = re.compile(r"^[a-z][a-z0-9_-]*$")
_INLINE = re.compile(r"`((?:\.venv/bin/)?hs [^`]+)`")


def _words(command: str) -> tuple[str, ...]:
    """The command's leading words (subcommands, then plain arguments) up to its first option."""
    words = []
    for token in command.split("#")[0].split()[1:]:
        if not _WORD.match(token):
            break
        words.append(token)
    return tuple(words)


def shown_commands() -> list[tuple[str, tuple[str, ...]]]:
    """(doc, command words) of every `hs` (or .venv/bin/hs) line in a fenced block, and of every
    inline code span that starts with it."""
    found = []
    for doc in DOCS:
        text = (REPO / doc).read_text(encoding="utf-8")
        inside = False
        for line in text.splitlines():
            if line.startswith("```"):
                inside = not inside
            elif inside and line.split()[:1] in (["hs"], [".venv/bin/hs"]):
                found.append((doc, _words(line)))
        found += [(doc, _words(span)) for span in _INLINE.findall(text)]
    return sorted(set(found))


def test_the_docs_show_commands():
    assert len(shown_commands()) >= 10


@pytest.mark.parametrize(("doc", "words"), shown_commands(), ids=lambda v: " ".join(v) if isinstance(v, tuple) else v)
def test_a_command_shown_in_the_docs_exists(doc, words):
    result = CliRunner().invoke(app, [*words, "--help"])
    assert result.exit_code == 0, f"{doc}: hs {' '.join(words)} --help: {result.output[-500:]}"


GUIDE = REPO / "docs" / "guide.md"


def test_the_guides_example_run_id_is_the_one_its_first_eval_makes():
    from configs.schema import EvalConfig, load_config
    from tasks.evaluation import run_id_for

    text = GUIDE.read_text(encoding="utf-8")
    assert "hs eval --benchmark dbbench --split dev --harness h0 --k 3 --seeds 3 " in text
    cfg = load_config(
        EvalConfig, None, {"env.benchmark": "dbbench", "split": "dev", "harness": "h0", "k": 3, "seeds": 3}
    )
    assert f"WHERE t.run_id = '{run_id_for(cfg)}'" in text and f"run {run_id_for(cfg)} · evaluation" in text


def test_the_guides_psql_line_and_deployment_names_work_as_written():
    from flows.registry import FLOWS

    text = GUIDE.read_text(encoding="utf-8")
    assert 'psql "$HS_DATABASE_URL"' not in text  # psql refuses postgresql+psycopg://
    assert 'psql "${HS_DATABASE_URL/+psycopg/}"' in text
    deploy = text[text.index("`hs deploy` registers") :].split("\n\n")[0]
    named = set(re.findall(r"`([a-z-]+)`", deploy))
    assert set(FLOWS) <= named and named - set(FLOWS) == {"harness-s"}  # the work pool
