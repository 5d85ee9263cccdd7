"""mosaic.diskcache: an answer computed once per key, kept across processes, never wrong."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from mosaic import diskcache


def test_an_answer_is_computed_once_per_key_and_read_back_in_another_process(tmp_path, monkeypatch):
    monkeypatch.setenv(diskcache.CACHE_VAR, str(tmp_path))
    calls = []

    def compute():
        calls.append(1)
        return {"options": [["lr", 0.1, None, True]]}

    first = diskcache.memo("kind", {"file": "a", "digest": "1"}, compute)
    again = diskcache.memo("kind", {"file": "a", "digest": "1"}, compute)
    assert first == again == {"options": [["lr", 0.1, None, True]]} and len(calls) == 1
    other = subprocess.run([sys.executable, "-c", "from mosaic import diskcache; import json; print(json.dumps("
                            "diskcache.memo('kind', {'digest': '1', 'file': 'a'}, lambda: 'recomputed')))"],
                           capture_output=True, text=True, env={**os.environ}, check=True)
    assert json.loads(other.stdout) == first  # key order does not matter

    diskcache.memo("kind", {"file": "a", "digest": "2"}, compute)  # the file changed
    diskcache.memo("other-kind", {"file": "a", "digest": "1"}, compute)
    diskcache.memo("kind", {"file": "a", "digest": "1"}, compute, refresh=True)
    assert len(calls) == 4


def test_answers_that_would_not_come_back_equal_are_not_kept(tmp_path, monkeypatch):
    monkeypatch.setenv(diskcache.CACHE_VAR, str(tmp_path))
    for answer in [(1, 2), {1: "a"}, float("nan"), object()]:
        calls = []
        for _ in range(2):
            got = diskcache.memo("odd", {"answer": repr(answer)}, lambda: calls.append(1) or answer)
            assert got is answer
        assert len(calls) == 2, answer
    assert not list(tmp_path.rglob("*.json"))


def test_a_cache_that_cannot_be_written_or_read_only_costs_time(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    monkeypatch.setenv(diskcache.CACHE_VAR, str(blocker))
    assert diskcache.memo("kind", {"k": 1}, lambda: [1, 2]) == [1, 2]

    monkeypatch.setenv(diskcache.CACHE_VAR, str(tmp_path / "cache"))
    path = diskcache.entry_path("kind", {"k": 1})
    path.parent.mkdir(parents=True)
    path.write_text('{"key": {"k": 1}, "answer": [9')  # torn by a crash, say
    assert diskcache.memo("kind", {"k": 1}, lambda: [1, 2]) == [1, 2]
    assert json.loads(path.read_text())["answer"] == [1, 2]
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary files left
