"""The documentation stays true: links resolve, documented commands parse (and the quick ones run),
the generated references match the code, and the README stays short with a compact matrix."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from cli_support import REPO, run_cli

DOCS = REPO / "docs"
README = REPO / "README.md"
PAGES = sorted([README, *DOCS.rglob("*.md")])
#: Pages whose ```bash blocks are checked command by command.
COMMAND_PAGES = [README, DOCS / "getting-started.md", DOCS / "troubleshooting.md"]
#: A command line ending in this comment is not parsed (it shows something that is meant to fail).
SKIP_MARK = "# docs: no-parse"
README_MAX_LINES = 130
MATRIX_CELL_MAX = 40
MATRIX_HEADING = "## What each worker can do"
WORKERS = ("ray", "xuance", "cleanrl", "tianshou", "jumanji", "benchmarl", "balrog", "mosaic_llm", "random")
#: Placeholders in documented commands, and what stands in for them when parsing.
PLACEHOLDERS = {"RUN_ID": "run-1", "RUN2": "run-2", "RUN": "run-1", "CONFIG.json": "config.json",
                "NAME": "random", "WORKER": "random", "SPEC": "spec.yaml", "ALGO": "ppo"}

FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.S | re.M)
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")
INLINE_CODE = re.compile(r"`[^`\n]*`")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$", re.M)


def _prose(text: str) -> str:
    """The text without fenced code blocks and inline code (links there are examples, not links)."""
    return INLINE_CODE.sub("", FENCE.sub("", text))


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: markdown stripped, lower case, punctuation dropped, spaces to -."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = text.replace("`", "").replace("*", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for match in HEADING.finditer(FENCE.sub("", path.read_text(encoding="utf-8"))):
        slug = _slug(match.group(2))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        out.add(slug if count == 0 else f"{slug}-{count}")
    return out


def _bash_commands(path: Path) -> list[str]:
    """Every `mosaic ...` line of the page's ```bash blocks."""
    lines = []
    for lang, body in FENCE.findall(path.read_text(encoding="utf-8")):
        if lang.strip() not in ("bash", "sh", "shell", "console"):
            continue
        for line in body.splitlines():
            line = line.strip()
            if line.startswith("$ "):
                line = line[2:]
            if line.startswith("mosaic ") and not line.endswith(SKIP_MARK):
                lines.append(line)
    return lines


def test_pages_found():
    names = {p.name for p in PAGES}
    assert {"README.md", "index.md", "getting-started.md", "troubleshooting.md", "results.md", "cli.md",
            "config.md"} <= names


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_links_and_images_resolve(page: Path):
    problems = []
    for target in LINK.findall(_prose(page.read_text(encoding="utf-8"))):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        resolved = (page.parent / file_part).resolve() if file_part else page
        if not resolved.exists():
            problems.append(f"{target}: {resolved} does not exist")
            continue
        if anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
            problems.append(f"{target}: no heading with anchor #{anchor} in {resolved.relative_to(REPO)}")
    assert not problems, f"{page.relative_to(REPO)}:\n  " + "\n  ".join(problems)


def test_index_lists_every_page():
    index = DOCS / "index.md"
    linked = {(index.parent / t.partition("#")[0]).resolve() for t in LINK.findall(_prose(index.read_text()))}
    missing = [str(p.relative_to(REPO)) for p in DOCS.rglob("*.md") if p != index and p.resolve() not in linked]
    assert not missing, f"docs/index.md does not link: {missing}"


def test_documented_commands_parse():
    from mosaic.clients.cli import build_parser

    checked, problems = 0, []
    for page in COMMAND_PAGES:
        for line in _bash_commands(page):
            words = shlex.split(line, comments=True)
            while words and words[-1] in ("&", ";"):
                words.pop()
            words = [PLACEHOLDERS.get(w, w) for w in words[1:]]
            try:
                build_parser().parse_args(words)
            except SystemExit as exc:
                if exc.code != 0:
                    problems.append(f"{page.name}: {line}")
            checked += 1
    assert checked >= 15, f"only {checked} documented commands found: is the extraction broken?"
    assert not problems, "documented commands that `mosaic` does not parse:\n  " + "\n  ".join(problems)


def test_parse_check_can_fail():
    """The check above is not vacuous: a wrong command is refused."""
    from mosaic.clients.cli import build_parser

    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--no-such-option"])


@pytest.fixture(scope="module")
def quick_home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("docs-home")


def test_quick_commands_run(quick_home: Path):
    help_out = run_cli("--help", home=quick_home)
    assert help_out.returncode == 0 and "workers" in help_out.stdout
    listed = run_cli("workers", home=quick_home)
    assert listed.returncode == 0, listed.stderr
    assert re.search(r"^random\s", listed.stdout, re.M), listed.stdout
    shown = run_cli("workers", "show", "random", home=quick_home)
    assert shown.returncode == 0, shown.stderr
    assert "config fields" in shown.stdout and "total_timesteps" in shown.stdout


def test_short_random_run(quick_home: Path):
    run = run_cli("run", "examples/random_connect_four.json", "--run-id", "docs-quick",
                  "--set", "total_timesteps=300", "--set", "reporting.every_timesteps=100",
                  home=quick_home, timeout=120, cwd=REPO)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "run docs-quick completed" in run.stdout
    runs = run_cli("runs", home=quick_home)
    assert runs.returncode == 0 and re.search(r"^docs-quick\s+completed", runs.stdout, re.M), runs.stdout
    show = run_cli("show", "latest", "--json", home=quick_home)
    assert show.returncode == 0 and '"status": "completed"' in show.stdout


def test_generated_references_are_current():
    env = {k: v for k, v in os.environ.items() if k != "GEN_REFERENCE_REEXEC"}
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "gen_reference"), "--check"],
                          capture_output=True, text=True, timeout=900, env=env, cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_readme_is_short_and_keeps_the_two_commands():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= README_MAX_LINES
    assert "bash scripts/run" in text and "bash scripts/test" in text


def _cells(row: str) -> list[str]:
    parts = re.split(r"(?<!\\)\|", row.strip())
    return [p.strip() for p in parts[1:-1]]


def _visible(cell: str) -> str:
    return re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", cell).replace("`", "")


def test_capability_matrix_is_compact():
    text = README.read_text(encoding="utf-8")
    assert MATRIX_HEADING in text
    section = text.split(MATRIX_HEADING, 1)[1]
    rows = []
    for line in section.splitlines()[1:]:
        if line.startswith("|"):
            rows.append(line)
        elif rows:
            break
    header, _, *body = rows
    assert len(_cells(header)) == 8, header
    long_cells = [c for row in rows for c in _cells(row) if len(_visible(c)) > MATRIX_CELL_MAX]
    assert not long_cells, f"matrix cells over {MATRIX_CELL_MAX} characters: {long_cells}"
    assert sorted(_visible(_cells(r)[0]) for r in body) == sorted(WORKERS)
    assert all(len(_cells(r)) == len(_cells(header)) for r in body)


def test_matrix_player_column_matches_the_workers():
    """A worker marked "player ✓" in the README serves players by its own description, and vice versa."""
    config = (DOCS / "reference" / "config.md").read_text(encoding="utf-8")
    serves = dict(re.findall(r"^## `(\w+)`[\s\S]*?serves a player \(`mosaic player`, arena\): (yes|no)", config,
                             re.M))
    text = README.read_text(encoding="utf-8").split(MATRIX_HEADING, 1)[1]
    rows = [line for line in text.splitlines() if line.startswith("| [") or line.startswith("| random")]
    marked = {_visible(_cells(r)[0]): "player ✓" in _cells(r)[4] for r in rows}
    assert set(marked) == set(WORKERS)
    wrong = {w: (marked[w], serves.get(w)) for w in WORKERS if marked[w] != (serves.get(w) == "yes")}
    assert not wrong, f"README matrix (player ✓) against the workers' descriptions (can_serve_player): {wrong}"
