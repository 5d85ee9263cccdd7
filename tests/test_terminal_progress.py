"""Progress on a terminal for a job counted in items (mosaic.workerkit.progress_line): ``mosaic arena run``'s
games, as ``mosaic run`` and ``mosaic experiment run`` show theirs; nothing where stderr is not a terminal.
(``mosaic eval``'s episodes: tests/test_eval_opponent.py.) Real tournaments of random and scripted play through
the real command line, its stderr on a pseudo-terminal (mosaic.testing.terminal)."""

from __future__ import annotations

import io

from mosaic.testing.terminal import run_on_terminal
from mosaic.workerkit.progress_line import ProgressLine

from cli_support import run_cli, write_config

SPEC = {"name": "tiny", "environment": {"family": "classic", "env_id": "tictactoe_v3"}, "games_per_pairing": 4,
        "players": {"rand": {"target": "random"}, "first": {"target": "scripted:mosaic.arena.heuristics:first_legal"}}}


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_line_says_done_of_total_rate_and_time_left():
    line = ProgressLine("arena t", 10, "games", done=2, stream=_Terminal())
    assert line.text(now=line.started) == "arena t [####----------------] 2/10 games · -/s · ETA ?"
    line.done = 6  # 4 played now, in 2 s: 2 a second, 4 left
    assert line.text(now=line.started + 2.0) == "arena t [############--------] 6/10 games · 2.0/s · ETA 2s"
    assert ProgressLine("eval r", None, "episodes").text() == "eval r 0 episodes · -/s"


def test_the_line_is_drawn_only_on_a_terminal():
    piped, terminal = io.StringIO(), _Terminal()
    for stream in (piped, terminal):
        with ProgressLine("eval r", 2, "episodes", stream=stream) as line:
            line.advance()
            line.say("a line of its own")
            line.advance()
    assert piped.getvalue() == "a line of its own\n"
    drawn = terminal.getvalue()
    assert "\r\033[Ka line of its own\n\r\033[Keval r [##########----------] 1/2 episodes" in drawn, drawn
    assert drawn.endswith(" 2/2 episodes · " + drawn.rsplit(" 2/2 episodes · ", 1)[1]) and drawn.endswith("\n")


def test_arena_run_shows_its_games_on_a_terminal(tmp_path):
    home = tmp_path / "home"
    spec = write_config(tmp_path / "tiny.json", SPEC)
    done = run_on_terminal(["arena", "run", str(spec), "-v"], home)
    assert done.returncode == 0, done.terminal[-3000:]
    assert "\r\033[Karena tiny [#####---------------] 1/4 games · " in done.terminal, done.terminal
    assert "arena tiny [####################] 4/4 games · " in done.terminal and " · ETA 0s" in done.terminal
    assert "\r\033[Krand~first game 0: " in done.terminal  # -v: each game on a line of its own, above the bar
    assert "tournament tiny: played 4 game(s); 4 of 4 done" in done.terminal


def test_arena_run_draws_no_line_where_stderr_is_not_a_terminal(tmp_path):
    spec = write_config(tmp_path / "tiny.json", SPEC)
    done = run_cli("arena", "run", str(spec), home=tmp_path / "home")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "games · " not in done.stderr and "ETA" not in done.stderr, done.stderr
