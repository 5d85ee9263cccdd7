"""A tournament's standings (mosaic.arena.standings), from journal lines written here: what the arena report
writes and the GUI's arena view shows, computed in one place."""

from __future__ import annotations

import pytest

from mosaic.arena.games import label_returns, rated_games
from mosaic.arena.standings import NO_FIRST_MOVE, compute_standings, report_settings


def line(pairing: str, game: int, first: str, second: str, first_return: float) -> dict:
    """A two-player game's journal line: ``first`` in seat player_0, its return and the opposite for ``second``."""
    return {"pairing": pairing, "game": game, "seed": game, "first": first, "second": second,
            "seats": {"player_0": first, "player_1": second},
            "returns": {"player_0": first_return, "player_1": -first_return}, "length": 9}


def team_line(game: int, sides: dict[str, str], teams: dict[str, float]) -> dict:
    return {"pairing": "a~b", "game": game, "seed": game // 2, "first": "a", "second": "b", "sides": sides,
            "teams": teams, "seats": {}, "returns": {}, "length": 9}


def test_a_game_is_rated_by_each_players_summed_returns():
    g = {"pairing": "a~b", "game": 0, "first": "b", "second": "a",
         "seats": {"x0": "a", "x1": "a", "y0": "b"}, "returns": {"x0": 1.0, "x1": -0.5, "y0": 0.25}}
    assert label_returns(g) == {"a": 0.5, "b": 0.25}
    (game,) = rated_games([g])
    assert (game.a, game.b, game.score_a, game.seat_a) == ("b", "a", 0.0, 0)  # the first mover as a


def test_standings_with_seats_alternating_fit_the_first_move_advantage():
    games = [line("a~b", k, *(("a", "b") if k % 2 == 0 else ("b", "a")), 1.0 if k % 3 else 0.0) for k in range(8)]
    games += [line("b~c", k, *(("b", "c") if k % 2 == 0 else ("c", "b")), 1.0 if k % 4 else -1.0) for k in range(8)]
    s = compute_standings(list(reversed(games)), reps=50, seed=3)  # the journal's order does not matter
    assert s.games == 16 and s.boot is not None and s.advantage is not None and s.why == ""
    assert s.first_mover is not None and s.first_mover.games == 16
    rows = s.rows()
    assert [r.rank for r in rows] == [1, 2, 3] and [r.player for r in rows] == list(s.boot.fit.ratings)
    assert all(r.interval is not None and r.interval.low <= r.elo <= r.interval.high for r in rows)
    assert sum(r.record.games for r in rows) == 2 * 16
    again = compute_standings(games, reps=50, seed=3)
    assert again.boot.intervals == s.boot.intervals  # seeded


def test_before_the_seats_alternate_the_ratings_are_fitted_without_a_first_mover():
    games = [line("a~b", k, "a", "b", [1.0, -1.0, 1.0, 0.0][k]) for k in range(4)]
    s = compute_standings(games, reps=50)
    assert s.boot is not None and s.advantage is None and s.notes[0] == NO_FIRST_MOVE
    assert s.first_mover is not None and s.first_mover.games == 4  # the record is still counted


def test_standings_before_any_game_and_players_without_one():
    s = compute_standings([], reps=50)
    assert s.games == 0 and s.boot is None and s.table is None and s.why == "no game finished yet"
    assert [(r.player, r.rank, r.record) for r in s.rows(["a", "b"])] == [("a", None, None), ("b", None, None)]
    s = compute_standings([line("a~b", 0, "a", "b", 1.0), line("a~b", 1, "b", "a", -1.0)], reps=50)
    rows = s.rows(["c", "a", "b"])
    assert [r.player for r in rows][-1] == "c" and rows[-1].rank is None and rows[-1].record is None


def test_team_games_rate_one_comparison_per_side_of_a_pair_with_no_first_mover():
    games = [team_line(0, {"a": "red", "b": "blue"}, {"a": 3.0, "b": 1.0}),
             team_line(1, {"b": "red", "a": "blue"}, {"b": 2.0, "a": 2.0}),
             team_line(2, {"a": "red", "b": "blue"}, {"a": 0.0, "b": 1.0})]  # its pair's other game: not yet
    rated = rated_games(games, teams=True)
    # blue: b's team 1.0 on the first game, a's 2.0 on the second; red: a's 3.0, b's 2.0 (sides in name order)
    assert [(g.a, g.b, g.score_a, g.seat_a) for g in rated] == [("b", "a", 0.0, None), ("a", "b", 1.0, None)]
    s = compute_standings(games + [team_line(3, {"b": "red", "a": "blue"}, {"b": 1.0, "a": 0.5})], teams=True,
                          reps=50)
    assert s.games == 4 and s.advantage is None and s.first_mover is None
    assert not any("first mover" in n for n in s.notes)


@pytest.mark.parametrize("report, expected", [({}, (1000, 0.95, 0)),
                                              ({"reps": 200, "confidence": 0.9, "seed": 4}, (200, 0.9, 4))])
def test_report_settings(report, expected):
    assert report_settings(report) == expected


def test_the_standings_carry_the_population_measures_of_the_same_games():
    """Nash averaging, alpha-Rank and cycles come with the standings (for the report and the GUI alike), seeded
    as the ratings are; a pairing never played leaves them untold, with why."""
    games = [line(f"{a}~{b}", k, *((a, b) if k % 2 == 0 else (b, a)), 1.0 if (k % 3) else -1.0)
             for a, b in (("a", "b"), ("b", "c"), ("a", "c")) for k in range(6)]
    s = compute_standings(games, reps=60, seed=2)
    pop = s.population
    assert pop is not None and pop.boot is not None and pop.boot.reps == 60 and pop.why == ""
    assert {r.player for r in pop.rows()} == {"a", "b", "c"}
    assert compute_standings(games, reps=60, seed=2).population.boot.weights == pop.boot.weights  # seeded
    assert compute_standings(games, reps=60, population=False).population is None
    partial = compute_standings([g for g in games if g["pairing"] != "a~c"], reps=60).population
    assert partial.boot is None and partial.rows() == [] and "a vs c" in partial.why
