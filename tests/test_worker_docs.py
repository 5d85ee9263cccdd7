"""Each worker's page agrees with the worker's own description.

A worker's page (docs/<name>-worker.md) ends with one section, "Offers and refuses (checked)", between
``<!-- offers:begin -->`` and ``<!-- offers:end -->``: its algorithms, env families, paradigms and
capabilities, whether it evaluates and serves a player, and each shared field honoured (as what) or refused
(why). The section must be exactly what ``scripts/gen_reference`` writes from ``mosaic workers show NAME
--json`` *now*: both sides are read live, so a worker that gains an algorithm, an env or a refusal while its page
stays behind fails here, naming the worker, the difference and the command that rewrites the section.
"""

from __future__ import annotations

import copy
import difflib
import importlib.machinery
import importlib.util
import os
from pathlib import Path
from typing import Any

import pytest

from cli_support import REPO


def _load_gen_reference() -> Any:
    """scripts/gen_reference as a module (it has no .py suffix), leaving this process's COLUMNS as it was."""
    columns = os.environ.get("COLUMNS")
    loader = importlib.machinery.SourceFileLoader("mosaic_gen_reference", str(REPO / "scripts" / "gen_reference"))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    try:
        loader.exec_module(module)
    finally:
        if columns is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = columns
    return module


GEN = _load_gen_reference()
#: worker name → its page, for every worker page there is.
PAGES = {GEN.page_worker(page): page for page in sorted((REPO / "docs").glob("*-worker.md"))}


@pytest.fixture(scope="module")
def described() -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """Every installed worker's description (the cached ``--describe``, as gen_reference reads it), and the
    broken workers' reasons."""
    return GEN.described_workers()


def _difference(worker: str, page: Path, text: str, doc: dict[str, Any]) -> str | None:
    """What is wrong with the page's offers section against ``doc``, said for a person; None if nothing."""
    name = page.relative_to(REPO)
    fix = f"rewrite it from the description with `{GEN.WORKER_DOCS_COMMAND}`"
    try:
        current = GEN.current_offers_section(text)
    except ValueError as exc:
        return f"{name}: {exc}"
    if current is None:
        return (f"{name} has no \"{GEN.OFFERS_HEADING[3:]}\" section between {GEN.OFFERS_BEGIN} and "
                f"{GEN.OFFERS_END}: {fix}")
    expected = GEN.offers_section(worker, doc)
    if current == expected:
        return None
    diff = difflib.unified_diff(current.splitlines(), expected.splitlines(), f"{name} (the page)",
                                f"mosaic workers show {worker} --json (the description)", lineterm="", n=0)
    return (f"{name} does not say what worker {worker!r} describes now (-: the page, +: the description):\n"
            + "\n".join(diff) + f"\n{fix}")


def test_every_installed_worker_has_a_page(described):
    documents, broken = described
    assert "random" in documents, f"discovery found no reference worker: {sorted(documents)}, broken: {broken}"
    missing = [f"{name}: {GEN.worker_page(name).relative_to(REPO)}"
               for name in sorted({*documents, *broken}) if not GEN.worker_page(name).exists()]
    assert not missing, ("installed workers without a page (write one, then run "
                         f"`{GEN.WORKER_DOCS_COMMAND}`): {missing}")


@pytest.mark.parametrize("worker", sorted(PAGES))
def test_offers_section_agrees_with_the_description(worker, described):
    documents, broken = described
    if worker in broken:
        pytest.fail(f"worker {worker} cannot describe itself, so its page cannot be checked: {broken[worker]}")
    if worker not in documents:
        pytest.skip(f"worker {worker} is not installed here")
    page = PAGES[worker]
    problem = _difference(worker, page, page.read_text(encoding="utf-8"), documents[worker])
    if problem is not None:
        pytest.fail(problem, pytrace=False)
    section = GEN.offers_section(worker, documents[worker])
    assert str(REPO) not in section and str(Path.home()) not in section, "a machine path in the section"


def test_a_change_the_page_lacks_is_named(described):
    """The comparison can fail: an algorithm and a refusal the page does not list are each named, with the
    worker and the command that rewrites the section."""
    documents, _ = described
    page = PAGES["random"]
    text = page.read_text(encoding="utf-8")
    assert _difference("random", page, text, documents["random"]) is None
    changed = copy.deepcopy(documents["random"])
    changed["capabilities"]["algorithms"] = [*changed["capabilities"]["algorithms"], "made_up_algo"]
    changed["shared_fields"]["refused"]["seed"] = "a made-up reason"
    changed["can_serve_player"] = True
    problem = _difference("random", page, text, changed)
    assert problem is not None
    assert "'random'" in problem and GEN.WORKER_DOCS_COMMAND in problem
    added = [line for line in problem.splitlines() if line.startswith("+") and not line.startswith("+++")]
    assert any("made_up_algo" in line for line in added), problem
    assert any(line.startswith("+| `seed` |") and line.endswith("| a made-up reason |") for line in added), problem
    assert any("serves a player" in line and line.endswith("yes") for line in added), problem


def test_only_the_section_is_rewritten(described):
    documents, _ = described
    section = GEN.offers_section("random", documents["random"])
    assert section == GEN.offers_section("random", copy.deepcopy(documents["random"]))  # deterministic
    prose = "# A page\n\nIts authors' prose.\n\n"
    appended = GEN.with_offers_section(prose, section)
    assert appended == prose.rstrip("\n") + "\n\n" + section + "\n"
    stale = section.replace("`random`", "`old_algo`", 1)
    assert stale != section
    around = prose + stale + "\n\n## A section someone added later\n"
    assert GEN.with_offers_section(around, section) == prose + section + "\n\n## A section someone added later\n"
    page = PAGES["random"]
    missing = _difference("random", page, prose, documents["random"])
    assert missing is not None and "has no" in missing and GEN.WORKER_DOCS_COMMAND in missing
    broken = _difference("random", page, prose + GEN.OFFERS_BEGIN + "\n", documents["random"])
    assert broken is not None and "exactly one" in broken
