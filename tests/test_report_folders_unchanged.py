"""The report folders of a fixed experiment and of fixed tournaments, fingerprinted: a refactoring of the
scoring code (intervals, bands, ratings) must leave every file the same.

Nothing is trained or played: the experiment's runs are written as the recorder leaves them (a manifest
through RunStore, telemetry lines as workers print them), the tournaments' journals as the arena driver
writes them (``Tournament.record``). The reports are written by the functions ``mosaic experiment report``
and ``mosaic arena report`` call (``write_report``, ``write_reports(get_tournaments(...))``).

Each file's fingerprint is the SHA-256 of its text with what varies between runs of the same report
(the temporary folder's path) replaced, or, for a PNG, of its decoded pixels (with its size): matplotlib's
Agg output is the same pixels from one run to the next here. ``FINGERPRINTS`` was recorded from the code
before the scoring package (``mosaic.scoring``) replaced ``mosaic.stats``, ``mosaic.curves`` and
``mosaic.ratings``; the two experiment report.md files were re-recorded when the score's line gained its units
(4023b62: that line the only difference). To see what changed: ``python tests/test_report_folders_unchanged.py`` prints the
current fingerprints.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path

import pytest

from mosaic.arena.report import write_reports
from mosaic.arena.tournament import get_tournaments, open_tournaments, parse_specs
from mosaic.experiments.report import ReportCell, ReportInput, write_report
from mosaic.runs import RunStore

pytest.importorskip("matplotlib")

VERSIONS = {"python": "3.11.9", "ray": "2.40.0"}


# -- the experiment -----------------------------------------------------------------------------------------
def _write_run(store: RunStore, run_id: str, points: list[tuple[float, float]], status: str) -> Path:
    run = store.create(run_id, {"worker": "ray"}, {"worker": "ray", "status": "created"})
    events = [{"type": "run_started", "worker": "ray", "config_digest": "0" * 64, "versions": VERSIONS,
               "resources": {"cpus": 1}, "env": {"family": "mpe", "env_id": "x"}}]
    for k, (x, y) in enumerate(points, start=1):
        events.append({"type": "metrics", "iteration": k, "timesteps_total": x, "episode_return_mean": y})
    events.append({"type": "run_completed", "summary": {}} if status == "completed" else
                  {"type": "run_failed", "error_type": "RuntimeError", "message": "boom"})
    lines = [json.dumps({"v": 1, **e, "run_id": run_id, "seq": i, "ts": 1_700_000_000.0 + i}, separators=(",", ":"))
             for i, e in enumerate(events)]
    run.telemetry_path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    run.update_manifest(status=status, versions=VERSIONS, worker="ray", env={"family": "mpe", "env_id": "x"})
    return run.root


def _value(level: float, plateau: int, scale: float, seed: int, k: int) -> float:
    """A learning curve: rising with the iteration k up to ``plateau`` (+ seed), a deterministic wobble."""
    return scale * (level * min(k, plateau + seed) / 10 + 0.4 * seed + 0.02 * ((7 * k + 3 * seed) % 5))


def experiment_cells(home: Path) -> list[ReportCell]:
    """3 configurations x 2 envs x 4 seeds: one still rising at the end, one levelling off late, one early; one
    run failed part way, one cell never ran; runs logging at different env steps (their curves meet on shared
    x values)."""
    store = RunStore(home)
    configs = {"algorithm=mappo": (10.0, 100), "algorithm=ippo": (8.0, 6), "algorithm=iql": (8.5, 2)}
    envs = {"simple_spread_v3": 1.0, "simple_tag_v3": 3.0}
    cells = []
    for conf, (level, plateau) in configs.items():
        for env, scale in envs.items():
            for seed in range(4):
                cid = f"c{len(cells):03d}"
                algorithm = conf.split("=")[1]
                settings = {"algorithm": algorithm, "environment.env_id": env, "seed": seed}
                if (conf, env, seed) == ("algorithm=iql", "simple_tag_v3", 3):
                    cells.append(ReportCell(cid, conf, env, seed, "pending", None, None, settings, "ray", algorithm,
                                            12_000))
                    continue
                failed = (conf, env, seed) == ("algorithm=ippo", "simple_tag_v3", 2)
                step = 1000 + 250 * (seed % 2)  # two logging periods
                points = [(step * k, _value(level, plateau, scale, seed, k)) for k in range(1, 12_000 // step + 1)]
                root = _write_run(store, f"run-{cid}", points[:4] if failed else points,
                                  "failed" if failed else "completed")
                cells.append(ReportCell(cid, conf, env, seed, "failed" if failed else "completed", f"run-{cid}", root,
                                        settings, "ray", algorithm, 12_000))
    return cells


def experiment_reports(base: Path) -> dict[str, Path]:
    """The report of the experiment in raw units, and normalised (optimality gap, normalised aggregates)."""
    cells = experiment_cells(base / "home")
    spec = {"name": "fixed", "seeds": 4}
    raw = ReportInput(name="fixed", spec=spec, cells=cells, reps=300, seed=3)
    normalised = ReportInput(name="fixed", spec=spec, cells=cells, reps=300, seed=3,
                             normalisation={"simple_spread_v3": (0.0, 10.0), "simple_tag_v3": (0.0, 30.0)})
    return {"experiment": write_report(base / "experiment", raw).parent,
            "experiment-normalised": write_report(base / "experiment-normalised", normalised).parent}


# -- the tournaments ----------------------------------------------------------------------------------------
def _outcome(first: str, second: str, skill: dict[str, float], game: int) -> float:
    """1, 0.5 or 0 for the first mover, from the skill gap and a first-move edge, deterministically."""
    edge = skill[first] - skill[second] + 0.6
    u = int(hashlib.sha256(f"{first}|{second}|{game}".encode()).hexdigest()[:8], 16) / 2**32 * 4 - 2
    return 1.0 if edge + u > 0.6 else 0.5 if edge + u > -0.3 else 0.0


def _two_player_line(pairing: str, game: int, first: str, second: str, seed: int, skill: dict[str, float]) -> dict:
    score = _outcome(first, second, skill, game)
    r0 = {1.0: 1.0, 0.5: 0.0, 0.0: -1.0}[score]
    return {"pairing": pairing, "game": game, "seed": seed, "first": first, "second": second,
            "seats": {"player_0": first, "player_1": second}, "returns": {"player_0": r0, "player_1": -r0},
            "length": 7 + (game * 5 + seed) % 20, "duration_s": 0.0123}


def _team_line(pairing: str, game: int, first: str, second: str, seed: int, skill: dict[str, float]) -> dict:
    u = int(hashlib.sha256(f"{pairing}|{game}".encode()).hexdigest()[:8], 16) / 2**32
    adversary, good = -3.0 + skill[first] + u, -5.0 + skill[second] - u  # first plays the adversary side
    return {"pairing": pairing, "game": game, "seed": seed, "first": first, "second": second,
            "seats": {"adversary_0": first, "agent_0": second, "agent_1": second},
            "returns": {"adversary_0": adversary, "agent_0": good / 2, "agent_1": good / 2}, "length": 10,
            "sides": {first: "adversary", second: "good"}, "teams": {first: adversary, second: good},
            "duration_s": 0.0456}


def tournament_reports(base: Path) -> dict[str, Path]:
    """A round robin of four players (one of them unbeaten, so the fit needs its prior), a gauntlet, a team
    tournament, and a several-game spec."""
    home = base / "home"
    c4 = {"family": "classic", "env_id": "connect_four_v3"}
    field = {"random": "random", "lowest": "scripted:mosaic.arena.heuristics:first_legal",
             "heuristic": "scripted:mosaic.arena.heuristics:connect_four", "strong": "random"}
    skill = {"random": 0.0, "lowest": -0.7, "heuristic": 1.2, "strong": 9.0}
    specs = {
        "round-robin": {"name": "round-robin", "environment": c4, "players": field, "games_per_pairing": 6,
                        "seed": 5, "report": {"reps": 300}},
        "gauntlet": {"name": "gauntlet", "environment": c4, "format": "gauntlet", "candidate": "heuristic",
                     "players": {k: field[k] for k in ("random", "lowest", "heuristic")}, "games_per_pairing": 12,
                     "seed": 1, "report": {"reps": 300, "seed": 4, "confidence": 0.9}},
        "teams": {"name": "teams", "environment": {"family": "mpe", "env_id": "simple_adversary_v3",
                                                   "env_kwargs": {"max_cycles": 10}},
                  "sides": {"adversary": ["adversary_0"], "good": ["agent_0", "agent_1"]}, "games_per_pairing": 8,
                  "seed": 3, "report": {"reps": 300}, "players": {"random": "random", "heuristic": "random",
                                                                  "lowest": "random"}},
        "league": {"name": "league", "players": {k: field[k] for k in ("random", "lowest", "heuristic")},
                   "games_per_pairing": 4, "seed": 2, "report": {"reps": 200},
                   "games": {"c4": {"environment": c4}, "ttt": {"environment": {"family": "classic",
                                                                                "env_id": "tictactoe_v3"},
                                                                "games_per_pairing": 6}}},
    }
    out = {}
    for name, spec in specs.items():
        for tournament in open_tournaments(parse_specs(spec), home):
            line = _team_line if tournament.spec.sides else _two_player_line
            for pairing, game, first, second, seed in tournament.spec.schedule():
                tournament.record(line(pairing, game, first, second, seed, skill))
        folder = base / f"tournament-{name}"
        write_reports(get_tournaments(name, home), folder)
        out[f"tournament-{name}"] = folder
    return out


# -- fingerprints -------------------------------------------------------------------------------------------
def _normalised_text(text: str, base: Path) -> str:
    text = text.replace(str(base.resolve()), "<BASE>").replace(str(base), "<BASE>")
    # durations and timestamps, where a report writes them
    text = re.sub(r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?([+-]\d{2}:?\d{2}|Z)?", "<TIME>", text)
    return re.sub(r'"duration_s": [0-9.e-]+', '"duration_s": <DURATION>', text)


def _rounded(value):
    """A JSON document with its floats to 8 significant digits: machines round a float's last digits
    differently (their BLAS's order of sums; a fit's iterations), as the printed tables, which are the same
    everywhere, show. A change of the scoring moves a number by far more."""
    if isinstance(value, float):
        return float(f"{value:.8g}")
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    return value


def _png(path: Path) -> str:
    from matplotlib import image

    pixels = image.imread(path)
    return f"png {pixels.shape} " + hashlib.sha256(pixels.tobytes()).hexdigest()


def fingerprint(folder: Path, base: Path) -> dict[str, str]:
    out = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = path.relative_to(folder).as_posix()
        if path.suffix == ".png":
            out[rel] = _png(path)
        elif path.suffix == ".json":  # its numbers to 8 significant digits (_rounded)
            text = json.dumps(_rounded(json.loads(path.read_text(encoding="utf-8"))), indent=1)
            out[rel] = hashlib.sha256(_normalised_text(text, base).encode()).hexdigest()
        else:
            out[rel] = hashlib.sha256(_normalised_text(path.read_text(encoding="utf-8"), base).encode()).hexdigest()
    return out


def fingerprints(base: Path) -> dict[str, str]:
    folders = {**experiment_reports(base / "e"), **tournament_reports(base / "t")}
    return {f"{name}/{rel}": digest for name, folder in folders.items()
            for rel, digest in fingerprint(folder, base).items()}


#: Recorded from the code before mosaic.scoring (mosaic.stats, mosaic.curves, mosaic.ratings); the tournaments'
#: report.md and ratings.json again, and their population.png, beats.png and population.json added, when the
#: report gained the population measures (Nash averaging, alpha-Rank, cycles; the Elo numbers unchanged).
#: The experiments' aggregates.png and probability_of_improvement.png again when their width came to follow the
#: longest configuration label (long labels had crushed the axes and collapsed the layout). The JSON files'
#: again when their numbers came to be compared to 8 significant digits (_rounded): another machine gave
#: ratings.json and population.json whose floats differed in their last digits only (about 1e-14 relative:
#: the population page's JSON recomputed there), the printed reports being the same.
FINGERPRINTS: dict[str, str] = {
    'experiment/aggregates.png': 'png (310, 1117, 4) f1dfdaeab2b96ff7d3a55909c5b5e9c89049bc096e41d54ce37b30aee38f4d69',
    'experiment/marl_eval.json': '79405350020040d65d7fcf0394817940289c9ff38dbac7300b126e0167b50089',
    'experiment/performance_profiles.png': 'png (360, 1000, 4) e415bb5536fd6a06d2ba080f7915b31ff7304a4edbb21d67cf9944770e6cb939',
    'experiment/probability_of_improvement.png': 'png (430, 777, 4) ff2600bb675c460120b85ef082af33124e9ebdcdb733742c2a53fc8a088136ef',
    'experiment/report.md': '73f55ef2632212c62770d5decd2ef7b06ffd3a963c651a7ba7d86ad21d9cdbaa',
    'experiment/sample_efficiency.png': 'png (360, 1000, 4) bd3d686a41cbe8083f47906304eaa966fb3c8962d15a65cf37e604f20369380d',
    'experiment/scores.csv': '2ed811de81ceb0b54a68f5c1ed17de3bdf9e3d13309b1b82ae69ebcae9053d1c',
    'experiment-normalised/aggregates.png': 'png (310, 1437, 4) ad09083d94702e6a31f122158da073f992261917c4fbca380ec078ef2bea4881',
    'experiment-normalised/marl_eval.json': '79405350020040d65d7fcf0394817940289c9ff38dbac7300b126e0167b50089',
    'experiment-normalised/performance_profiles.png': 'png (360, 500, 4) 3671664125e334dc31823c0c88ca97a3fadf33e5794f1eabec37904db98eca89',
    'experiment-normalised/probability_of_improvement.png': 'png (430, 777, 4) ff2600bb675c460120b85ef082af33124e9ebdcdb733742c2a53fc8a088136ef',
    'experiment-normalised/report.md': '827a025afbb3cb8e73aa801084d368a57e4a045187ad43376e2ba752d00ca0f4',
    'experiment-normalised/sample_efficiency.png': 'png (360, 1000, 4) bd3d686a41cbe8083f47906304eaa966fb3c8962d15a65cf37e604f20369380d',
    'experiment-normalised/scores.csv': '2ed811de81ceb0b54a68f5c1ed17de3bdf9e3d13309b1b82ae69ebcae9053d1c',
    'tournament-round-robin/games.csv': 'e3fa3587c9cd1302efcda2a6f4ef8fd0d4d68dcabd67d1fd56965dd5f27c0bae',
    'tournament-round-robin/ratings.csv': '7d928c7d31a3d3bb3907ac7ac2519ee75bfd790da2b22a25e8305644e8751b89',
    'tournament-round-robin/ratings.json': '4de4b6f87d2c63e3d4e5e8dccd31182381b633b263e39b7f133ba2f09219e16b',
    'tournament-round-robin/ratings.png': 'png (385, 1210, 4) 04b23e39009d6cafeef5f667739e8ea05c1ba3e825baa0e3b5b7424110c5b9d4',
    'tournament-round-robin/report.md': '41a6b02617cb1eed8b922cd9305cc8877ada8f7bf661784ca55df8159c711113',
    'tournament-gauntlet/games.csv': '8934ceeb093d7c9de2bb42746964134ac387d4d60705675f596ca71e0bc45a0b',
    'tournament-gauntlet/ratings.csv': 'fede5b3cc993e5f67bd4782eef06acf19a04c8853e19c6877a5d8f793df84bb9',
    'tournament-gauntlet/ratings.json': '6ccdcaa84b25789e12cb865d42ab8b4aec5eb1d21b97b45f785d2a8c23a362b2',
    'tournament-gauntlet/ratings.png': 'png (330, 1210, 4) 717a9e1ee1262ec45787de1fbd4d48c8dc3b26fa56960363322236f95644b7fc',
    'tournament-gauntlet/report.md': 'c43639d5918c81de6b78c9acb9ae47bf3592f9c9d9e4bccfb292beb5958c333e',
    'tournament-teams/games.csv': '2b000e35f0452a208d30879d411f9ca75cbb33615dfcff57d7f73cdc89d331a6',
    'tournament-teams/ratings.csv': '99b80bf77d946ee25c56d34a3b6855c006685289ce2b5bd83fdf349c2e42bc10',
    'tournament-teams/ratings.json': '88303ba90e15f63d1ad9a810a15bb0fd70ab5dd1039c3d76d3176ca310dc83a0',
    'tournament-teams/ratings.png': 'png (330, 1210, 4) 00641c42a9fe4f212e33d75ea8968df5630b5602a1b2e495cd064e3195e2559f',
    'tournament-teams/report.md': '7f342c2f9396b8336c517d97b4dc035c4f63b43ceb9736a3e1b3d9b394393f3e',
    'tournament-league/c4/games.csv': '719382d90301b5aa1c9b56b28c0289d3afb1623d00d3ecb2551654507a70105b',
    'tournament-league/c4/ratings.csv': 'bb7b5cdebb3054d3d4812f1b21ba53ad2e2484be5d7d8f07e96124c574c2db29',
    'tournament-league/c4/ratings.json': '790b7aeed069a6c4f4d40c3bc47936da18ac0c0672ba9390245e2c8d8839581f',
    'tournament-league/c4/ratings.png': 'png (330, 1210, 4) fe091911d48166d748975bff598b2ad000de8a9cf2b1390904325097dc53279c',
    'tournament-league/c4/report.md': '4f950f889f4c3b73a54ddfabdd1b1c797f8df673129c795c2d09524a40a3d7b3',
    'tournament-league/report.md': '7037ef5c2f53f3b789105c90ec07448091c7f5c489988168f7542b03c2e2d0c5',
    'tournament-league/ttt/games.csv': '7d831927cd694b172a6513ab6586d9b87e6c013902dcba95b87d081db5fcc987',
    'tournament-league/ttt/ratings.csv': '60e0ae1449bbf4417cc1985b31f7e89ea1326bdc4762fc62643926ab4a8f937e',
    'tournament-league/ttt/ratings.json': '76f44ff690c875cd5f1d095f37a03a5f8717cb2ae4851ccb40eba0431bbb2f61',
    'tournament-league/ttt/ratings.png': 'png (330, 1210, 4) 5f551dcaf8bebc1c6c61d9e8935223734936c78ce1d4ea1c2c1d6c3a49587876',
    'tournament-league/ttt/report.md': '0ec805866254cd5ff0d3e5bd3c0750a900ff60ec5c55298c60509d8d4e92f373',
    'tournament-league/beats.png': 'png (715, 935, 4) 1b4db51cfc958dd961d21f0ac28b995c5d619196575755ace4a6ac3d42a81090',
    'tournament-league/c4/beats.png': 'png (715, 935, 4) 1b4db51cfc958dd961d21f0ac28b995c5d619196575755ace4a6ac3d42a81090',
    'tournament-league/c4/population.png': 'png (374, 1430, 4) fdae3bb25137d8092ba45b075fb7cebb447e8135896a668db223cd68c2fa507d',
    'tournament-league/population.json': '7610794b4ac01eda022902379c0035c445407a55a43b04da531d0fb40853d473',
    'tournament-league/population.png': 'png (374, 1430, 4) ab00fb7a96ec29c8acb2031027dd06126eea78957da6a1644d2a8dea203584d0',
    'tournament-league/ttt/beats.png': 'png (715, 935, 4) 1b4db51cfc958dd961d21f0ac28b995c5d619196575755ace4a6ac3d42a81090',
    'tournament-league/ttt/population.png': 'png (374, 1430, 4) 3c55b3c253eb641da2cc2cc15511af75c376288c359cec3d3c67c39ac480e50b',
    'tournament-round-robin/beats.png': 'png (715, 935, 4) 4612cc33f973c11704287b13d63b0f3e691e681641982694f4aa8888adc24fe7',
    'tournament-round-robin/population.png': 'png (418, 1430, 4) e05ae1ff956f362a6144e63c5146144e29bf01e33debec8eac1fe3a4298a61c5',
    'tournament-teams/beats.png': 'png (715, 935, 4) 1b4db51cfc958dd961d21f0ac28b995c5d619196575755ace4a6ac3d42a81090',
    'tournament-teams/population.png': 'png (374, 1430, 4) 5db6e9e196ef01063102e6f89993c6a0c37e63d2585c14adddda3c46c1ce716b',
}


def test_the_report_folders_are_the_recorded_ones(tmp_path):
    found = fingerprints(tmp_path)
    assert sorted(found) == sorted(FINGERPRINTS), "files added or missing in a report folder"
    changed = sorted(name for name in found if found[name] != FINGERPRINTS[name])
    assert changed == [], f"report files that changed: {changed}"


if __name__ == "__main__":  # print the current fingerprints (to record them, or to see which file changed)
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        for key, value in fingerprints(Path(tmp)).items():
            print(f"    {key!r}: {value!r},")
    sys.exit(0)
