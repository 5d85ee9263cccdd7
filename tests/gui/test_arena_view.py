"""The Arena tab: a real tiny tournament (random, a scripted heuristic and the lowest legal move on connect four,
played in-process by `mosaic.arena.tournament.run` with real player processes), watched by a real ArenaView."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from PySide6.QtCore import Qt

from mosaic.arena.tournament import Tournament, parse_spec, run
from mosaic.clients.gui.arena_view import GAME_COLUMNS, LIVE_REPS, POPULATION_COLUMNS, STANDING_COLUMNS, ArenaView

pytestmark = pytest.mark.xdist_group("arena")

CONNECT_FOUR = {"family": "classic", "env_id": "connect_four_v3"}
PLAYERS = {"random": "random", "heuristic": "scripted:mosaic.arena.heuristics:connect_four",
           "lowest": "scripted:mosaic.arena.heuristics:first_legal"}
WAIT_MS = 60_000


@pytest.fixture(scope="module")
def played(tmp_path_factory):
    """A finished round robin of 3 players, 2 games per pairing (one per seating): its home."""
    home = tmp_path_factory.mktemp("arena") / "home"
    spec = parse_spec({"name": "c4", "environment": CONNECT_FOUR, "players": PLAYERS, "games_per_pairing": 2,
                       "seed": 3, "report": {"reps": 1000, "seed": 1}})
    assert run(Tournament.open(spec, home), home=home) == 6
    return home


@pytest.fixture
def home(played, tmp_path):
    """A copy of the tournament's home for one test to change."""
    copy = tmp_path / "home"
    shutil.copytree(played, copy)
    return copy


def journal(home) -> list[dict]:
    return [json.loads(line) for line in (home / "arena" / "c4" / "games.jsonl").read_text().splitlines()]


def records(games: list[dict]) -> dict[str, list[int]]:
    """Each player's [wins, draws, losses] from the journal's returns, counted here from scratch."""
    out = {label: [0, 0, 0] for label in PLAYERS}
    for g in games:
        mine = {label: sum(r for agent, r in g["returns"].items() if g["seats"][agent] == label)
                for label in (g["first"], g["second"])}
        a, b = g["first"], g["second"]
        k = 0 if mine[a] > mine[b] else 2 if mine[a] < mine[b] else 1
        out[a][k] += 1
        out[b][2 - k] += 1
    return out


def pair_scores(games: list[dict]) -> dict[tuple[str, str], tuple[float, int]]:
    """(row player's score against the column player, games) for every ordered pair that met."""
    points: dict[tuple[str, str], list[float]] = {}
    for g in games:
        mine = {label: sum(r for agent, r in g["returns"].items() if g["seats"][agent] == label)
                for label in (g["first"], g["second"])}
        a, b = g["first"], g["second"]
        s = 1.0 if mine[a] > mine[b] else 0.0 if mine[a] < mine[b] else 0.5
        points.setdefault((a, b), []).append(s)
        points.setdefault((b, a), []).append(1.0 - s)
    return {k: (sum(v) / len(v), len(v)) for k, v in points.items()}


def standings(view: ArenaView) -> dict[str, dict[str, str]]:
    table = view.standings_table
    rows = {}
    for row in range(table.rowCount()):
        cells = {name: table.item(row, col).text() for col, name in enumerate(STANDING_COLUMNS)}
        rows[cells["player"]] = cells
    return rows


def wdl(view: ArenaView) -> dict[str, list[int]]:
    return {p: [int(c["W"]), int(c["D"]), int(c["L"])] for p, c in standings(view).items()}


def open_view(qtbot, home) -> ArenaView:
    view = ArenaView(home)
    qtbot.addWidget(view)
    view.resize(1100, 800)
    view.show()
    qtbot.waitExposed(view)
    return view


def double_click_game(qtbot, view: ArenaView, row: int) -> None:
    """A user's double-click on a game's row (press and release, then Qt's double-click): a replay opens."""
    table = view.games_table
    at = table.visualItemRect(table.item(row, 0)).center()
    opened = len(view.replays)
    qtbot.mouseClick(table.viewport(), Qt.MouseButton.LeftButton, pos=at)
    qtbot.mouseDClick(table.viewport(), Qt.MouseButton.LeftButton, pos=at)
    assert len(view.replays) == opened + 1 and view.replays[-1].game == view.game_at(row)


def test_standings_crosstable_and_games_of_a_played_tournament(qtbot, home):
    games = journal(home)
    view = open_view(qtbot, home)
    assert [view.list.item(i).text() for i in range(view.list.count())] == ["c4"]
    qtbot.waitUntil(lambda: view.standings is not None and view.standings.games == 6, timeout=WAIT_MS)
    assert f"{LIVE_REPS} bootstrap resamples" in view.header.text() and "uses 1000" in view.header.text()
    assert view.progress.value() == 6 and view.progress.maximum() == 6
    assert "6 of 6 scheduled games played" in view.progress_label.text()
    # W/D/L as counted here from the journal, in the rating order of the fit (best first)
    assert wdl(view) == records(games)
    rows = standings(view)
    ratings = view.standings.boot.fit.ratings
    assert [view.standings_table.item(r, 1).text() for r in range(3)] == list(ratings)
    assert rows["heuristic"]["rank"] == "1" and rows["heuristic"]["games"] == "4"
    for player, cells in rows.items():
        iv = view.standings.boot.intervals[player]
        assert cells["Elo"] == f"{ratings[player]:.0f}" and cells["interval"] == f"[{iv.low:.0f}, {iv.high:.0f}]"
        w, d, l_ = records(games)[player]
        assert cells["score"] == f"{(w + d / 2) / (w + d + l_):.3f}"
    # the crosstable: the row player's score against the column player, with the games behind it
    for (a, b), (score, n) in pair_scores(games).items():
        assert view.cross_cell(a, b) == f"{score:.2f} ({n})"
    assert view.cross_cell("random", "random") == "—"
    first = view.standings.table.first_mover
    assert first.games == 6 and "over 6 games" in view.first_mover.text()
    assert "first-move advantage" in view.first_mover.text()
    # the games: all of them, then those of the pairing whose crosstable cell is clicked
    assert view.games_table.rowCount() == 6
    assert view.games_table.horizontalHeaderItem(GAME_COLUMNS.index("moves")).text() == "moves"
    players = list(PLAYERS)
    view._cross_clicked(players.index("lowest"), players.index("heuristic"))
    assert view.pairing.currentText() == "heuristic~lowest" and view.games_table.rowCount() == 2
    shown = {(view.games_table.item(r, 0).text(), int(view.games_table.item(r, 1).text()))
             for r in range(view.games_table.rowCount())}
    assert shown == {("heuristic~lowest", 0), ("heuristic~lowest", 1)}
    for r in range(2):
        g = view.game_at(r)
        assert view.games_table.item(r, GAME_COLUMNS.index("seed")).text() == str(g["seed"])
        assert view.games_table.item(r, GAME_COLUMNS.index("length")).text() == str(g["length"])
    view.close_view()


def test_a_game_appended_to_the_journal_updates_the_standings(qtbot, home):
    path = home / "arena" / "c4" / "games.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    last = json.loads(lines[-1])
    path.write_text("".join(lines[:-1]))  # the tournament before its last game
    view = open_view(qtbot, home)
    qtbot.waitUntil(lambda: view.standings is not None and view.standings.games == 5, timeout=WAIT_MS)
    assert wdl(view) == records([json.loads(x) for x in lines[:-1]])
    assert view.progress.value() == 5 and view.games_table.rowCount() == 5
    # the last game finishes (journaled without its moves), a torn line after it as a crash leaves one
    del last["moves"]
    with path.open("a") as fh:
        fh.write(json.dumps(last) + "\n" + '{"pairing": "random~heu')
    qtbot.waitUntil(lambda: view.standings.games == 6, timeout=WAIT_MS)
    assert wdl(view) == records([json.loads(x) for x in lines])
    assert view.progress.value() == 6 and view.games_table.rowCount() == 6
    # the game without moves cannot be replayed, and the dialog says so
    row = next(r for r in range(6) if (view.game_at(r)["pairing"], view.game_at(r)["game"])
               == (last["pairing"], last["game"]))
    assert view.games_table.item(row, GAME_COLUMNS.index("moves")).text() == "—"
    double_click_game(qtbot, view, row)
    qtbot.waitUntil(lambda: bool(view.replays) and view.replays[-1].ready, timeout=WAIT_MS)
    dialog = view.replays[-1]
    assert "recorded without moves" in dialog.frame.text()
    assert not dialog.slider.isEnabled() and dialog.mismatch is None
    view.close_view()


def population(view: ArenaView) -> dict[str, dict[str, str]]:
    table = view.population_table
    return {table.item(r, 0).text(): {name: table.item(r, c).text() for c, name in enumerate(POPULATION_COLUMNS)}
            for r in range(table.rowCount())}


def test_the_population_measures_are_shown_and_what_the_data_cannot_tell(qtbot, home):
    """Nash weights, Nash ratings and alpha-Rank mass with their intervals, the cycles, from the standings'
    computation; a pairing with two games is said to be too thin, a pairing not played yet leaves them untold."""
    view = open_view(qtbot, home)
    qtbot.waitUntil(lambda: view.standings is not None and view.standings.games == 6, timeout=WAIT_MS)
    rows = population(view)
    assert set(rows) == set(PLAYERS)
    computed = {r.player: r for r in view.standings.population.rows()}
    weights = 0.0
    for player, cells in rows.items():
        w = computed[player].weight
        assert cells["Nash weight"] == f"{w.point:.2f} [{w.low:.2f}, {w.high:.2f}]"
        m = computed[player].mass
        assert cells["alpha-Rank mass"] == f"{m.point:.2f} [{m.low:.2f}, {m.high:.2f}]"
        assert cells["alpha-Rank"] == str(computed[player].rank) and cells["in support"].endswith("%")
        weights += float(cells["Nash weight"].split()[0])
    assert abs(weights - 1.0) <= 0.015  # a mixture, rounded to 2 places per player
    first = view.population_table.item(0, 0).text()
    best = max(float(c["Nash rating"].split()[0]) for c in rows.values())
    assert float(rows[first]["Nash rating"].split()[0]) == best  # best first
    told = view.population_label.text()
    assert ("transitive" in told or "cycles:" in told) and f"of {LIVE_REPS} resamples" in told
    assert "the alpha-Rank ranking settles from alpha" in told or "has not settled" in told
    assert "The data cannot tell 3 pairing(s) with too few games" in told  # two games each
    # a pairing not played yet (as in a live tournament): the meta-game is incomplete, and the view says why
    path = home / "arena" / "c4" / "games.jsonl"
    kept = [line for line in path.read_text().splitlines(keepends=True) if '"random~lowest"' not in line]
    assert len(kept) == 4
    path.write_text("".join(kept))
    view.refresh()
    qtbot.waitUntil(lambda: view.standings.games == 4, timeout=WAIT_MS)
    assert view.population_table.rowCount() == 0
    assert view.population_label.text().startswith("cannot be told yet: games: 1 pairing(s) never played: "
                                                   "lowest vs random")
    view.close_view()


def play_a_game(seed: int) -> dict:
    """A journal line played here with the env, random legal moves recorded (for a journal without moves)."""
    from mosaic.workerkit.envs import make_env

    env = make_env("classic", "connect_four_v3", "AEC", {}, None)
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    returns = {a: 0.0 for a in env.possible_agents}
    moves = []
    for agent in env.agent_iter():
        obs, _, term, trunc, _ = env.last()
        action = None if term or trunc else int(rng.choice(np.flatnonzero(obs["action_mask"])))
        if action is not None:
            moves.append([agent, action])
        env.step(action)
        for a, r in env.rewards.items():
            returns[a] += float(r)
    env.close()
    return {"pairing": "random~heuristic", "game": 99, "seed": seed, "first": "random", "second": "heuristic",
            "seats": {"player_0": "random", "player_1": "heuristic"}, "returns": returns, "length": len(moves),
            "duration_s": 0.0, "moves": moves}


def test_a_game_replays_move_by_move_to_its_journaled_returns(qtbot, home):
    view = open_view(qtbot, home)
    qtbot.waitUntil(lambda: view.games_table.rowCount() == 6, timeout=WAIT_MS)
    with_moves = [r for r in range(6) if "moves" in view.game_at(r) and any(view.game_at(r)["returns"].values())]
    if with_moves:
        row = with_moves[0]
        game = view.game_at(row)
        double_click_game(qtbot, view, row)
    else:  # the tournament journals no moves yet: a game played here
        game = play_a_game(7)
        view.open_replay(game)
    qtbot.waitUntil(lambda: bool(view.replays) and view.replays[-1].ready, timeout=WAIT_MS)
    dialog = view.replays[-1]
    assert dialog.error is None, dialog.error
    moves = game["moves"]
    assert dialog.slider.maximum() == len(moves) == game["length"] and dialog.slider.value() == 0
    assert dialog.caption.text().startswith(f"start: reset with seed {game['seed']}")
    assert not dialog.prev_button.isEnabled()
    start = dialog.frame.pixmap().toImage()
    for k in range(1, len(moves) + 1):
        dialog.next_button.click()
        agent, action = moves[k - 1]
        assert dialog.caption.text().startswith(
            f"move {k} of {len(moves)}: {agent} ({game['seats'][agent]}) played {action}")
    assert dialog.slider.value() == len(moves) and not dialog.next_button.isEnabled()
    assert dialog.replay.returns == game["returns"] and dialog.mismatch is None and dialog.warning.isHidden()
    end = dialog.frame.pixmap().toImage()
    assert not end.isNull() and end != start  # the pieces dropped show
    dialog.prev_button.click()
    assert dialog.slider.value() == len(moves) - 1
    # a journal whose moves do not lead to its returns (the last move lost) is replayed with a warning
    cut = {**game, "moves": moves[:-1]}
    view.open_replay(cut)
    qtbot.waitUntil(lambda: view.replays[-1].ready, timeout=WAIT_MS)
    warned = view.replays[-1]
    assert warned.mismatch and "differ from the journal's" in warned.mismatch
    assert warned.slider.maximum() == len(moves) - 1
    view.close_view()


def test_the_games_of_a_several_game_tournament_are_listed_as_separate_entries(qtbot, home):
    """A spec with `games`: each game is its own entry (NAME/GAME), with its own standings from its own games."""
    from mosaic.arena.tournament import open_tournaments, parse_specs

    specs = parse_specs({"name": "lg", "players": PLAYERS, "games_per_pairing": 2, "seed": 1,
                         "games": {"connect_four": {"environment": CONNECT_FOUR, "players": ["random", "lowest"]},
                                   "tictactoe": {"environment": {"family": "classic", "env_id": "tictactoe_v3"},
                                                 "players": ["random", "lowest"], "games_per_pairing": 4}}})
    for tournament in open_tournaments(specs, home):
        run(tournament, home=home)
    view = open_view(qtbot, home)
    assert [view.list.item(i).text() for i in range(view.list.count())] == ["c4", "lg/connect_four", "lg/tictactoe"]
    view.select("lg/tictactoe")
    qtbot.waitUntil(lambda: view.standings is not None and view.standings.games == 4, timeout=WAIT_MS)
    assert view.header.text().startswith("lg/tictactoe: classic/tictactoe_v3") and view.progress.maximum() == 4
    assert set(view.standings.boot.fit.ratings) == {"random", "lowest"}
    view.select("lg/connect_four")
    qtbot.waitUntil(lambda: view.standings is not None and view.standings.games == 2, timeout=WAIT_MS)
    assert view.tournament.name == "lg/connect_four" and view.games_table.rowCount() == 2
    view.close_view()
