"""The population measures where a user looks: `mosaic arena report` on a real tournament (scripted and random
players on connect four and tic-tac-toe, pooled), its terminal tables, report.md, ratings.json, population.json
and the plots, each rendered and inspected (content inside the axes, no text outside the canvas)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from cli_support import run_cli
from mosaic.arena.report import beats_figure, population_figure, write_reports
from mosaic.arena.standings import compute_population
from mosaic.arena.tournament import get_tournaments, open_tournaments, parse_specs
from mosaic.scoring.ratings import Game

pytestmark = pytest.mark.xdist_group("arena")
pytest.importorskip("matplotlib")

PLAYERS = {"random": "random", "lowest": "scripted:mosaic.arena.heuristics:first_legal",
           "heuristic": "scripted:mosaic.arena.heuristics:connect_four"}
LEAGUE = {"name": "pop", "players": PLAYERS, "seed": 5, "report": {"reps": 300},
          "games": {"connect_four": {"environment": {"family": "classic", "env_id": "connect_four_v3"},
                                     "games_per_pairing": 6, "opening_moves": 2},
                    "tictactoe": {"environment": {"family": "classic", "env_id": "tictactoe_v3"},
                                  "players": ["random", "lowest"], "games_per_pairing": 2}}}


@pytest.fixture(scope="module")
def reported(tmp_path_factory):
    """The league played and reported through the real command line: (home, report's stdout)."""
    base = tmp_path_factory.mktemp("population")
    spec = base / "pop.json"
    spec.write_text(json.dumps(LEAGUE))
    home = base / "home"
    played = run_cli("arena", "run", str(spec), home=home, timeout=600)
    assert played.returncode == 0, played.stderr[-2000:]
    report = run_cli("arena", "report", "pop", home=home, timeout=600)
    assert report.returncode == 0, report.stderr[-2000:]
    return home, report.stdout


def _table(stdout: str, title_start: str) -> dict[str, list[str]]:
    """The rows (split on two or more spaces) of the terminal table whose title starts with ``title_start``."""
    import re

    lines = stdout.splitlines()
    at = next(k for k, line in enumerate(lines) if line.startswith(title_start))
    rows = {}
    for line in lines[at + 3:]:
        if not line.strip():
            break
        cells = re.split(r"\s{2,}", line.strip())
        rows[cells[0] if not cells[0].isdigit() else cells[1]] = cells
    return rows


def test_the_report_prints_its_main_tables_then_where_the_files_are(reported):
    home, stdout = reported
    folder = home / "arena" / "pop" / "report"
    lines = stdout.strip().splitlines()
    assert lines[-1] == str(folder / "report.md")  # the path stays the last line
    assert lines[-2].startswith(f"files in {folder}: ") and "population.png" in lines[-2] and \
        "connect_four/beats.png" in lines[-2]
    c4 = json.loads((folder / "connect_four" / "ratings.json").read_text())
    standings = _table(stdout, "pop/connect_four: standings")
    assert set(standings) == set(PLAYERS)
    for player, cells in standings.items():  # the terminal's numbers are the report's
        rating = c4["ratings"][player]
        assert cells[2] == f"{rating['elo']:.0f}" and cells[3] == f"[{rating['low']:.0f}, {rating['high']:.0f}]"
    adv = c4["first_move_advantage_elo"]
    assert f"first-move advantage {adv['point']:+.0f} Elo [{adv['low']:+.0f}, {adv['high']:+.0f}]" in stdout
    population = _table(stdout, "pop/connect_four: Nash averaging and alpha-Rank")
    for player, cells in population.items():
        mine = c4["population"]["players"][player]
        w, m = mine["nash_weight"], mine["alpha_rank_mass"]
        assert cells[1] == f"{w['point']:.2f} [{w['low']:.2f}, {w['high']:.2f}]"
        assert cells[4] == f"{m['point']:.2f} [{m['low']:.2f}, {m['high']:.2f}]" and cells[5] == str(mine["alpha_rank"])
    pooled = _table(stdout, "pop (pooled over connect_four, tictactoe): Nash averaging")
    assert set(pooled) == {"random", "lowest"}  # the players of every game
    # tic-tac-toe's pairing played 2 games: the data cannot tell it, and the terminal says so
    assert "1 pairing(s) too thin to tell" in next(x for x in lines if x.startswith("pop/tictactoe: Nash"))


def test_the_report_files_hold_the_population_measures(reported):
    home, _ = reported
    folder = home / "arena" / "pop" / "report"
    c4 = json.loads((folder / "connect_four" / "ratings.json").read_text())["population"]
    assert c4["payoff"] == "logit" and c4["alpha"] == 10 and c4["m"] == 50 and c4["reps"] == 300
    weights = [p["nash_weight"]["point"] for p in c4["players"].values()]
    masses = [p["alpha_rank_mass"]["point"] for p in c4["players"].values()]
    assert sum(weights) == pytest.approx(1) and sum(masses) == pytest.approx(1)
    for p in c4["players"].values():
        for key in ("nash_weight", "nash_rating", "alpha_rank_mass"):
            assert p[key]["low"] - 1e-9 <= p[key]["point"] <= p[key]["high"] + 1e-9
    # the heuristic (win, block, centre) beats random and lowest-move play: the whole Nash weight is on it
    assert c4["players"]["heuristic"]["nash_weight"]["point"] == pytest.approx(1)
    assert ["heuristic", "random"] in c4["cycles"]["beats"] and c4["thin_pairings"] == []
    assert len(c4["alpha_sweep"]["alphas"]) == len(c4["alpha_sweep"]["mass"]["heuristic"])
    ttt = json.loads((folder / "tictactoe" / "ratings.json").read_text())["population"]
    assert ttt["thin_pairings"] == [{"game": None, "a": "lowest", "b": "random", "games": 2}]
    pooled = json.loads((folder / "population.json").read_text())
    assert pooled["pooled"] == ["connect_four", "tictactoe"] and set(pooled["players"]) == {"random", "lowest"}
    assert {t["game"] for t in pooled["thin_pairings"]} == {"tictactoe"}
    assert "connect_four: heuristic left out (not in every pooled game)" in pooled["notes"]
    text = (folder / "report.md").read_text()
    assert text.index("## Game: connect_four") < text.index("## All games pooled")
    assert text.count("Population: Nash averaging, alpha-Rank, cycles") == 3  # each game's and the pooled one
    assert "played too few games to tell their result from chance" in text
    for name in ("population.png", "beats.png", "connect_four/population.png", "tictactoe/beats.png"):
        pixels = _pixels(folder / name)
        assert pixels.std() > 0.05, name  # drawn, not an empty canvas


def _pixels(path):
    from matplotlib import image

    return image.imread(path)[..., :3]


def test_a_gauntlet_report_says_the_population_measures_cannot_be_told(tmp_path):
    """A gauntlet plays only the candidate's pairings: the report says why there is no Nash averaging."""
    spec = {"name": "g", "environment": {"family": "classic", "env_id": "connect_four_v3"}, "players": PLAYERS,
            "format": "gauntlet", "candidate": "heuristic", "games_per_pairing": 6, "report": {"reps": 100}}
    (tournament,) = open_tournaments(parse_specs(spec), tmp_path / "home")
    for pairing, game, first, second, seed in tournament.spec.schedule():
        won = first == "heuristic"
        tournament.record({"pairing": pairing, "game": game, "seed": seed, "first": first, "second": second,
                           "seats": {"player_0": first, "player_1": second},
                           "returns": {"player_0": 1.0 if won else -1.0, "player_1": -1.0 if won else 1.0},
                           "length": 9})
    collected: list = []
    path = write_reports(get_tournaments("g", tmp_path / "home"), tmp_path / "out", collect=collected)
    text = path.read_text()
    assert "Not computed: games: 1 pairing(s) never played: lowest vs random" in text
    assert "the data cannot tell" in text.lower()
    assert json.loads((path.parent / "ratings.json").read_text())["population"] == {
        "why": "games: 1 pairing(s) never played: lowest vs random; the meta-game needs every pairing (play them, "
               "or leave a player out)"}
    assert not (path.parent / "population.png").exists()


def test_a_rating_whose_interval_has_no_width_is_plotted(tmp_path):
    """A team gauntlet where one player won every comparison and the other pairing drew both: every resample fits
    the same ratings, and the winner's percentile interval lies a rounding error above its point estimate. The
    report's plot draws the bar with no width (the numbers as computed) rather than failing the report."""
    env = {"family": "mpe", "env_id": "simple_tag_v3", "env_kwargs": {"max_cycles": 25}}
    spec = {"name": "flat", "environment": env, "format": "gauntlet", "candidate": "random", "games_per_pairing": 2,
            "seed": 4, "report": {"reps": 100}, "sides": {"adversaries": ["adversary_0", "adversary_1"],
                                                          "good": ["agent_0"]},
            "players": {"random": "random", "greedy": "g", "sampled": "s"}}
    (tournament,) = open_tournaments(parse_specs(spec), tmp_path / "home")
    teams = {("random~greedy", 0): (0.0, 0.0), ("random~greedy", 1): (0.0, 0.0),
             ("random~sampled", 0): (0.0, 0.0), ("random~sampled", 1): (100.0, -50.0)}  # (first's, second's)
    for pairing, game, first, second, seed in tournament.spec.schedule():
        tournament.record({"pairing": pairing, "game": game, "seed": seed, "first": first, "second": second,
                           "sides": {first: "adversaries", second: "good"},
                           "teams": dict(zip((first, second), teams[pairing, game])), "seats": {}, "returns": {},
                           "length": 25})
    path = write_reports(get_tournaments("flat", tmp_path / "home"), tmp_path / "out")
    ratings = json.loads((path.parent / "ratings.json").read_text())["ratings"]
    winner = ratings["sampled"]
    assert winner["low"] > winner["elo"] and winner["low"] - winner["elo"] < 1e-9, \
        f"the case this test is for: an interval a rounding error off its point ({winner})"
    assert (path.parent / "ratings.png").stat().st_size > 5000


# -- the plots, rendered and inspected ---------------------------------------------------------------------
def _cyclic_games(names=("rock", "paper", "scissors", "a-rather-long-player-name", "extra"), games=40, seed=0):
    """Rock beats scissors beats paper beats rock (0.75 each way), the long-named player even with them, and
    every one of them beating ``extra`` (0.8)."""
    rng = np.random.default_rng(seed)
    cycle = {("rock", "scissors"), ("scissors", "paper"), ("paper", "rock")}
    out = []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            p = 0.75 if (a, b) in cycle else 0.25 if (b, a) in cycle else 0.8 if b == "extra" else 0.5
            out += [Game(a, b, float(rng.random() < p), k % 2) for k in range(games)]
    return out


def _inspect(fig) -> None:
    """Every text inside the canvas; every axes draws something, inside its limits."""
    from matplotlib.text import Text

    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    canvas = fig.bbox
    drawn = fig.get_tightbbox(renderer)  # what is drawn, tick labels included (those outside the limits are not)
    assert drawn.x0 >= -0.01 and drawn.y0 >= -0.01 and drawn.x1 <= fig.bbox_inches.x1 + 0.01 and \
        drawn.y1 <= fig.bbox_inches.y1 + 0.01, f"drawn {drawn} beyond the canvas {fig.bbox_inches}"
    ticks = {id(t) for ax in fig.axes for axis in (ax.xaxis, ax.yaxis)
             for t in (*axis.get_ticklabels(minor=False), *axis.get_ticklabels(minor=True))}
    texts = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip() and id(t) not in ticks]
    assert texts
    for t in texts:
        box = t.get_window_extent(renderer)
        assert box.x0 >= canvas.x0 - 0.5 and box.y0 >= canvas.y0 - 0.5 and box.x1 <= canvas.x1 + 0.5 and \
            box.y1 <= canvas.y1 + 0.5, f"{t.get_text()!r} outside the canvas: {box} not in {canvas}"
    for ax in fig.axes:
        drawn = [a for a in (*ax.lines, *ax.collections, *ax.patches, *ax.texts) if a.get_visible()]
        assert drawn, ax.get_title()
        box = ax.get_window_extent(renderer)
        for artist in drawn:
            extent = artist.get_window_extent(renderer)
            if extent.width == 0 and extent.height == 0:
                continue
            assert extent.x0 >= box.x0 - 12 and extent.x1 <= box.x1 + 12 and extent.y0 >= box.y0 - 12 and \
                extent.y1 <= box.y1 + 12, f"{artist} outside its axes {ax.get_title()!r}"


def test_the_population_plots_keep_their_content_inside(tmp_path):
    population = compute_population(_cyclic_games(), reps=200)
    assert population.boot is not None and ("paper", "rock", "scissors") in population.boot.cycles.cycles
    fig = population_figure(population)
    _inspect(fig)
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == ["Nash averaging", "alpha-Rank (alpha 10, m 50)", "alpha sweep"]
    weights = fig.axes[0]
    at = dict(zip(weights.get_yticks(), (t.get_text() for t in weights.get_yticklabels())))
    assert at[max(at)] == population.rows()[0].player  # the best on top
    beats = beats_figure(population)
    _inspect(beats)
    ax = beats.axes[0]
    red = [a for a in ax.texts if getattr(a, "arrow_patch", None) is not None
           and a.arrow_patch.get_edgecolor()[:3] == pytest.approx((0xD5 / 255, 0x5E / 255, 0))]
    cycle_edges = {(c[k], c[(k + 1) % len(c)]) for c in population.boot.cycles.cycles for k in range(len(c))}
    assert len(red) == len(cycle_edges) >= 3  # the cycles' arrows are the highlighted ones
    assert "cycle" in ax.get_title()
    # a transitive population: no arrow highlighted, the title says so
    ordered = [Game(a, b, 1.0 if k % 4 else 0.5, k % 2) for a, b in (("a", "b"), ("b", "c"), ("a", "c"))
               for k in range(8)]
    plain = compute_population(ordered, reps=100)
    plain_fig = beats_figure(plain)
    _inspect(plain_fig)
    assert plain_fig.axes[0].get_title() == "transitive: no cycle"


def test_the_population_example_spec_reads():
    """docs/arena.md's example: the heuristic and an exact copy of it, lowest-move and random play."""
    from cli_support import EXAMPLES
    from mosaic.arena.tournament import read_specs

    (spec,) = read_specs(EXAMPLES / "arena" / "connect_four_population.yaml")
    targets = {p.label: p.target for p in spec.players}
    assert spec.name == "c4-population" and targets["heuristic"] == targets["heuristic_copy"]
    assert len(list(spec.schedule())) == 60


def test_a_cycle_the_resamples_do_not_confirm_is_said_to_be_undecided():
    """A planted cycle at 0.6 with 12 games a pairing shows in the point estimate but not in every resample:
    the report's "What the data cannot tell" says so, with its share; a firm one (0.9, 40 games) is not
    listed there."""
    from mosaic.arena.report import population_markdown

    def games(p, n, seed):
        rng = np.random.default_rng(seed)
        cycle = (("a", "b"), ("b", "c"), ("c", "a"))
        return [Game(x, y, float(rng.random() < p), k % 2) for x, y in cycle for k in range(n)]

    from mosaic.scoring.population import cycles, meta_game

    seed = next(s for s in range(50) if cycles(meta_game(games(0.6, 12, s))).cycles)  # the cycle in the point
    weak = compute_population(games(0.6, 12, seed), reps=300)
    (cycle,) = weak.boot.cycles.cycles
    share = weak.boot.cycle_share[cycle]
    assert share < 0.95
    text = "\n".join(population_markdown(weak, 0.95))
    told = text[text.index("What the data cannot tell"):]
    assert f"A cycle of the point estimate in fewer than 95% of resamples: {' > '.join([*cycle, cycle[0]])} " \
        f"({share:.0%})" in told
    firm = compute_population(games(0.9, 40, 0), reps=300)
    assert firm.boot.cycle_share[firm.boot.cycles.cycles[0]] >= 0.95
    firm_text = "\n".join(population_markdown(firm, 0.95))
    assert "fewer than 95% of resamples" not in firm_text[firm_text.index("What the data cannot tell"):]


def _close(a, b) -> bool:
    """``a == b`` for JSON, floats equal to 1e-9 relative: another machine's BLAS may round a last digit."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and a == pytest.approx(b, rel=1e-9, abs=1e-12)
    return a == b


def test_the_close_comparison_still_tells_a_changed_number():
    assert _close({"x": [1.0, {"y": 0.0019709144251014226}]}, {"x": [1.0, {"y": 0.001970914425101422}]})
    assert not _close({"x": [1.0, {"y": 0.00197}]}, {"x": [1.0, {"y": 0.00198}]})
    assert not _close({"x": 1.0}, {"x": 1.0, "z": 2})


def test_the_results_pages_population_is_what_the_arena_computes_from_its_games(tmp_path):
    """docs/results.md's connect-four population (docs/results/c4_libraries/population.json) is recomputed from the
    committed games.csv by scripts/population_from_games.py, the arena's own functions: the page's numbers are
    not typed in."""
    import subprocess
    import sys

    from cli_support import REPO

    folder = REPO / "docs" / "results" / "c4_libraries"
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "population_from_games.py"),
                           str(folder / "games.csv"), str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    made, page = (json.loads(p.read_text()) for p in (tmp_path / "population.json", folder / "population.json"))
    assert _close(made, page), "population.json differs from what its games give"
    assert (tmp_path / "population.md").read_text() == (folder / "population.md").read_text()
    mine = json.loads((folder / "population.json").read_text())["players"]
    assert mine["heuristic"]["nash_weight"]["point"] == pytest.approx(1.0)
    assert mine["random"]["nash_rating"]["point"] > mine["ray-ppo"]["nash_rating"]["point"]  # what the page says


def _population_of(games_csv, out, *extra):
    import subprocess
    import sys

    from cli_support import REPO

    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "population_from_games.py"), str(games_csv),
                           str(out), *extra], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads((out / "population.json").read_text())


def test_the_three_library_tournaments_population_is_what_its_games_give_with_and_without_the_heuristic(tmp_path):
    """docs/results.md's three-library connect-four tournament: the population section `mosaic arena report` wrote
    from the tournament's journal (ratings.json) is what the committed games.csv gives, and the population without
    the heuristic (every game it played left out) is recomputed the same way: the page's numbers are not typed in."""
    from cli_support import REPO

    folder = REPO / "docs" / "results" / "c4_three_libraries"
    whole = _population_of(folder / "games.csv", tmp_path / "whole")
    assert _close(whole, json.loads((folder / "ratings.json").read_text())["population"])
    assert whole["players"]["heuristic"]["nash_weight"]["point"] == pytest.approx(1.0)  # it takes the whole Nash

    rest = _population_of(folder / "games.csv", tmp_path / "rest", "--without", "heuristic")
    assert _close(rest, json.loads((folder / "without_heuristic" / "population.json").read_text()))
    assert (tmp_path / "rest" / "population.md").read_text() == \
        (folder / "without_heuristic" / "population.md").read_text()
    assert "heuristic" not in rest["players"]
    weights = {name: row["nash_weight"]["point"] for name, row in rest["players"].items()}
    assert {name for name, weight in weights.items() if weight > 1e-6} == {"lowest", "ray-ppo-60k", "xuance-mappo"}
    beats = {tuple(pair) for pair in rest["cycles"]["beats"]}  # the page's cycle: lowest > xuance > ray-60k > lowest
    assert {("lowest", "xuance-mappo"), ("xuance-mappo", "ray-ppo-60k"), ("ray-ppo-60k", "lowest")} <= beats


def test_population_from_games_refuses_a_player_the_games_do_not_name(tmp_path):
    import subprocess
    import sys

    from cli_support import REPO

    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "population_from_games.py"),
                           str(REPO / "docs" / "results" / "c4_libraries" / "games.csv"), str(tmp_path / "out"),
                           "--without", "nobody"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "--without: nobody: not a player" in proc.stderr and "heuristic" in proc.stderr
    assert not (tmp_path / "out").exists()
