"""The tournaments in the home, live: standings with rating intervals, the crosstable, the games, a game's replay.

A tournament is a folder under ``MOSAIC_HOME/arena`` (``mosaic.arena.tournament``): its ``spec.json`` and
``games.jsonl``, one line per finished game (each game of a several-game spec is a folder of its own, listed
as ``NAME/GAME``). The view reads the journal every two seconds, and only when its
size or modification time changed; it takes the whole lines appended since the last read (a line still being
written waits for the next read), and a game journaled twice counts once, as ``Tournament.games`` does.

Each change recomputes the standings in a background thread, so the window never waits on the fit. They are
computed as the report computes them, by :func:`mosaic.arena.standings.compute_standings` (rated games, a
Bradley-Terry fit on the Elo scale with bootstrap intervals, the crosstable with Wilson intervals, the first
mover's record), with only ``LIVE_REPS`` resamples (the header says so; ``mosaic arena report`` uses the spec's
count). Before the seats have alternated in any pairing (a live tournament plays one seating of a pairing
first), the ratings are fitted without the first-move parameter, and the notes say so. The same computation
gives the population measures (:class:`mosaic.arena.standings.Population`): each player's Nash weight and Nash
rating and its alpha-Rank mass with their intervals, and the cycles of the beats relation with their shares
of the resamples, or why they cannot be told yet (a pairing not played yet). This view only shows them: it
rates nothing itself.

Double-clicking a game opens :class:`ReplayDialog`: a game journaled with its ``moves`` is replayed by
stepping a fresh env (``mosaic.workerkit.envs.make_env`` with ``render_mode="rgb_array"``) reset with the
game's seed, one rendered frame per move, with a slider and previous/next buttons. The replay must end at the
journaled returns; where it does not, the dialog warns.
"""

from __future__ import annotations

import json
import math
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np
from PySide6.QtCore import QObject, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QPixmap
from PySide6.QtWidgets import (QAbstractItemView, QComboBox, QDialog, QHBoxLayout, QHeaderView, QLabel, QListWidget,
                               QProgressBar, QPushButton, QSizePolicy, QSlider, QSplitter, QTableWidget,
                               QTableWidgetItem, QVBoxLayout, QWidget)

from mosaic.arena.games import label_returns
from mosaic.arena.standings import Standings, compute_standings, report_settings
from mosaic.arena.tournament import Tournament, listed_names
from mosaic.clients.gui.lists import refill_names
from mosaic.clients.gui.frames import to_qimage

REFRESH_MS = 2000            # the list of tournaments and the selected one's journal: at most this often
LIVE_REPS = 200              # bootstrap resamples in the live view (the report uses the spec's, 1000 by default)
STANDING_COLUMNS = ("rank", "player", "Elo", "interval", "games", "W", "D", "L", "score")
POPULATION_COLUMNS = ("player", "Nash weight", "in support", "Nash rating", "alpha-Rank mass", "alpha-Rank")
GAME_COLUMNS = ("pairing", "game", "seed", "first", "second", "result", "length", "moves")
ALL_PAIRINGS = "all pairings"
FRAME_SIDE = 900             # a replay's frames are kept at most this many pixels on their longer side
FRAME_BYTES = 256 << 20      # and at most this many bytes of them per replay (a longer game's later frames: none)
RETURNS_TOLERANCE = 1e-6
LOSS, DRAW, WIN = QColor("#D55E00"), QColor("#FFFFFF"), QColor("#0072B2")


# -- the journal ------------------------------------------------------------------------------------------
@dataclass
class GamesTail:
    """``games.jsonl`` read from where the last read stopped: the games by (pairing, game), the first line of
    a game kept (as :meth:`Tournament.games`), in the order they finished."""

    path: Path
    games: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    offset: int = 0
    mark: tuple[int, int] | None = None

    def read(self) -> bool:
        """Take the whole lines appended since the last read; True if a game came (or the file was replaced)."""
        try:
            st = self.path.stat()
        except OSError:
            st = None
        mark = None if st is None else (st.st_size, st.st_mtime_ns)
        if mark == self.mark:
            return False
        self.mark = mark
        replaced = st is None or st.st_size < self.offset
        if replaced:  # gone, or rewritten shorter: read again from the start
            had = bool(self.games)
            self.games, self.offset = {}, 0
            if st is None:
                return had
        with self.path.open("rb") as fh:
            fh.seek(self.offset)
            data = fh.read(st.st_size - self.offset)
        end = data.rfind(b"\n")
        if end < 0:
            return replaced
        self.offset += end + 1
        came = False
        for line in data[:end].split(b"\n"):
            try:
                game = json.loads(line)
                key = (str(game["pairing"]), int(game["game"]))
            except (ValueError, KeyError, TypeError):
                continue  # a torn line from a crash
            if key not in self.games:
                self.games[key] = game
                came = True
        return came or replaced


def result_text(game: Mapping[str, Any]) -> str:
    """Who won a journaled game (``LABEL won``) or ``draw``."""
    try:
        scores = label_returns(game)
        first, second = scores[game["first"]], scores[game["second"]]
    except (KeyError, TypeError, ValueError):
        return "?"
    return f"{game['first']} won" if first > second else f"{game['second']} won" if second > first else "draw"


# -- work in the background, scores in colour ------------------------------------------------------------
class _Relay(QObject):
    """Carries a background thread's result to the UI thread (a queued signal)."""

    done = Signal(object, object)  # token, result


def in_background(relay: _Relay, token: Any, work: Callable[[], Any]) -> threading.Thread:
    """Run ``work`` on a daemon thread; ``relay.done(token, result or the exception)`` on the UI thread."""

    def target() -> None:
        try:
            result = work()
        except Exception as exc:  # noqa: BLE001 - shown by the view
            result = exc
        try:
            relay.done.emit(token, result)
        except RuntimeError:  # the view was closed and deleted meanwhile
            pass

    thread = threading.Thread(target=target, name="arena-view", daemon=True)
    thread.start()
    return thread


def score_colour(score: float) -> QColor:
    """Red for 0, white for 1/2, blue for 1, in between linearly."""
    far, t = (LOSS, 1.0 - 2.0 * score) if score < 0.5 else (WIN, 2.0 * score - 1.0)
    t = min(1.0, max(0.0, t)) * 0.75
    return QColor(*(round(base + (end - base) * t) for base, end in
                    ((DRAW.red(), far.red()), (DRAW.green(), far.green()), (DRAW.blue(), far.blue()))))


# -- a game's replay --------------------------------------------------------------------------------------
@dataclass
class Replay:
    """A journaled game stepped again: ``frames[k]`` after ``k`` moves (None where not kept), ``steps[k - 1]``
    what was played at move ``k`` (``[(agent, action)]``: one agent in a turn-based game, every live one in a
    parallel step), ``totals[k]`` each agent's return after it; ``returns`` at the end, ``recorded`` the
    journal's; ``problem``: why the replay does not end where the journal does (None: it does)."""

    recorded: dict[str, float]
    with_moves: bool = True
    frames: list[np.ndarray | None] = field(default_factory=list)
    steps: list[list[tuple[str, Any]]] = field(default_factory=list)
    totals: list[dict[str, float]] = field(default_factory=list)
    returns: dict[str, float] = field(default_factory=dict)
    problem: str | None = None


def _shrunk(frame: Any) -> np.ndarray | None:
    if frame is None:
        return None
    pixels = np.asarray(frame)
    if pixels.ndim not in (2, 3) or pixels.size == 0:
        return None
    stride = max(1, math.ceil(max(pixels.shape[:2]) / FRAME_SIDE))
    return np.ascontiguousarray(pixels[::stride, ::stride])


def replay_game(environment: Mapping[str, Any], game: Mapping[str, Any]) -> Replay:
    """Step a fresh env, reset with the game's seed, through its ``moves``, rendering each position.

    ``[[agent, action], ...]`` moves are a turn-based (AEC) game's, stepped as the match did (agents already
    done stepped with None); ``[{agent: action}, ...]`` a parallel game's. The environment's ``api_type``,
    when the spec names one, decides instead.
    """
    from mosaic.workerkit.envs import make_env
    from mosaic.workerkit.player import from_wire

    recorded = {str(a): float(r) for a, r in (game.get("returns") or {}).items()}
    out = Replay(recorded)
    moves = game.get("moves")
    if moves is None:
        out.with_moves = False
        return out
    parallel = bool(moves) and isinstance(moves[0], Mapping)
    api = str(environment.get("api_type") or ("PARALLEL" if parallel else "AEC"))
    env = make_env(str(environment["family"]), str(environment["env_id"]), api,
                   dict(environment.get("env_kwargs") or {}), "rgb_array")
    kept = [0]

    def snapshot(returns: dict[str, float]) -> None:
        frame = _shrunk(env.render()) if kept[0] < FRAME_BYTES else None
        if frame is not None:
            kept[0] += frame.nbytes
        out.frames.append(frame)
        out.totals.append(dict(returns))

    try:
        returns = {str(a): 0.0 for a in env.possible_agents}
        if api == "AEC":
            env.reset(seed=int(game["seed"]))
            snapshot(returns)
            index = 0
            for agent in env.agent_iter():
                _, _, term, trunc, _ = env.last()
                if term or trunc:
                    action = None
                else:
                    if index >= len(moves):
                        break  # the game was cut at the match's max_steps
                    mover, wire = moves[index]
                    if mover != agent:
                        out.problem = f"move {index + 1}: the journal has {mover} moving where the env expects {agent}"
                        break
                    index += 1
                    action = from_wire(wire)
                env.step(action)
                for a, r in env.rewards.items():
                    returns[str(a)] = returns.get(str(a), 0.0) + float(r)
                if action is not None:
                    out.steps.append([(agent, wire)])
                    snapshot(returns)
            if out.problem is None and index < len(moves):
                out.problem = f"the env ended after {index} of the journal's {len(moves)} moves"
        else:
            env.reset(seed=int(game["seed"]))
            snapshot(returns)
            for index, actions in enumerate(moves):
                if not env.agents:
                    out.problem = f"the env ended after {index} of the journal's {len(moves)} steps"
                    break
                _, rewards, _, _, _ = env.step({a: from_wire(x) for a, x in actions.items()})
                for a, r in rewards.items():
                    returns[str(a)] = returns.get(str(a), 0.0) + float(r)
                out.steps.append(list(actions.items()))
                snapshot(returns)
    finally:
        env.close()
    out.returns = returns
    if out.problem is None:
        differ = [a for a in sorted(set(returns) | set(recorded))
                  if abs(returns.get(a, 0.0) - recorded.get(a, 0.0)) > RETURNS_TOLERANCE]
        if differ:
            out.problem = ("the replayed returns differ from the journal's: "
                           + ", ".join(f"{a} {returns.get(a, 0.0):+g} (journal {recorded.get(a, 0.0):+g})"
                                       for a in differ))
    return out


def _action_text(wire: Any, limit: int = 40) -> str:
    text = json.dumps(wire) if not isinstance(wire, str) else wire
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _returns_text(returns: Mapping[str, float]) -> str:
    return ", ".join(f"{a} {r:+g}" for a, r in returns.items())


class ReplayDialog(QDialog):
    """One journaled game, replayed move by move (computed in a background thread when opened)."""

    def __init__(self, environment: Mapping[str, Any], game: Mapping[str, Any], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.game = dict(game)
        self.replay: Replay | None = None
        self.error: str | None = None
        self.setWindowTitle(f"{game.get('pairing')} game {game.get('game')}: {game.get('first')} vs "
                            f"{game.get('second')}")
        self.resize(720, 720)
        self.header = QLabel(f"{game.get('first')} moved first, {game.get('second')} second; seed {game.get('seed')}; "
                             f"{result_text(game)} in {game.get('length')} moves · seats: "
                             + ", ".join(f"{a} = {p}" for a, p in (game.get("seats") or {}).items()))
        self.header.setWordWrap(True)
        self.frame = QLabel("replaying…")
        self.frame.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.frame.setMinimumSize(320, 280)
        self.frame.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Ignored)
        self.frame.setStyleSheet("background: black; color: lightgray;")
        self.caption = QLabel()
        self.caption.setWordWrap(True)
        self.summary = QLabel()
        self.summary.setWordWrap(True)
        self.warning = QLabel()
        self.warning.setWordWrap(True)
        self.warning.setStyleSheet("color: #D55E00; font-weight: bold;")
        self.warning.hide()
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.setEnabled(False)
        self.slider.valueChanged.connect(self.show_move)
        self.prev_button = QPushButton("◀ previous")
        self.next_button = QPushButton("next ▶")
        self.prev_button.clicked.connect(lambda: self.slider.setValue(self.slider.value() - 1))
        self.next_button.clicked.connect(lambda: self.slider.setValue(self.slider.value() + 1))
        for button in (self.prev_button, self.next_button):
            button.setEnabled(False)
        controls = QHBoxLayout()
        controls.addWidget(self.prev_button)
        controls.addWidget(self.slider, 1)
        controls.addWidget(self.next_button)
        layout = QVBoxLayout(self)
        layout.addWidget(self.header)
        layout.addWidget(self.frame, 1)
        layout.addWidget(self.caption)
        layout.addLayout(controls)
        layout.addWidget(self.summary)
        layout.addWidget(self.warning)
        self._relay = _Relay(self)
        self._relay.done.connect(self._replayed, Qt.ConnectionType.QueuedConnection)
        if "moves" not in game:
            self._replayed(None, Replay({}, with_moves=False))
        else:
            in_background(self._relay, None, lambda: replay_game(environment, game))

    @property
    def ready(self) -> bool:
        return self.replay is not None or self.error is not None

    def _replayed(self, _token: Any, result: Any) -> None:
        if isinstance(result, Exception):
            self.error = f"{type(result).__name__}: {result}"
            self.frame.setText("the game could not be replayed")
            self._warn(f"the replay failed: {self.error}")
            return
        self.replay = result
        if not result.with_moves:
            self.frame.setText("This game was recorded without moves, so it cannot be replayed.\n"
                               "(The tournament's journal had no moves when it was played.)")
            self.caption.setText("recorded without moves")
            return
        self.slider.setRange(0, len(result.steps))
        self.slider.setEnabled(True)
        for button in (self.prev_button, self.next_button):
            button.setEnabled(True)
        self.summary.setText(f"journal's returns: {_returns_text(result.recorded)} · replayed: "
                             f"{_returns_text(result.returns)}")
        if result.problem:
            self._warn(f"⚠ this replay does not match the journal: {result.problem}")
        self.show_move(self.slider.value())

    def _warn(self, text: str) -> None:
        self.warning.setText(text)
        self.warning.show()

    @property
    def mismatch(self) -> str | None:
        """The warning shown, if any."""
        return self.warning.text() if not self.warning.isHidden() else None

    def show_move(self, k: int) -> None:
        """The position after ``k`` moves."""
        replay = self.replay
        if replay is None or not replay.with_moves:
            return
        k = max(0, min(k, len(replay.steps)))
        seats = self.game.get("seats") or {}
        if k == 0:
            first = replay.steps[0][0][0] if replay.steps else None
            text = f"start: reset with seed {self.game.get('seed')}" + (
                f"; {first} ({seats.get(first, '?')}) moves first" if first else "")
        else:
            played = "; ".join(f"{a} ({seats.get(a, '?')}) played {_action_text(x)}" for a, x in replay.steps[k - 1])
            text = f"move {k} of {len(replay.steps)}: {played} · returns so far: {_returns_text(replay.totals[k])}"
        self.caption.setText(text)
        self.prev_button.setEnabled(k > 0)
        self.next_button.setEnabled(k < len(replay.steps))
        self._draw()

    def _draw(self) -> None:
        replay = self.replay
        if replay is None or not replay.with_moves or not replay.frames:
            return
        frame = replay.frames[max(0, min(self.slider.value(), len(replay.frames) - 1))]
        if frame is None:
            self.frame.setPixmap(QPixmap())
            self.frame.setText("this frame was not kept (the replay's frames reached their memory budget)")
            return
        pixmap = QPixmap.fromImage(to_qimage(frame))
        self.frame.setPixmap(pixmap.scaled(self.frame.size(), Qt.AspectRatioMode.KeepAspectRatio,
                                           Qt.TransformationMode.SmoothTransformation))

    def resizeEvent(self, event: Any) -> None:  # noqa: N802  (Qt's name)
        super().resizeEvent(event)
        self._draw()


# -- the view ---------------------------------------------------------------------------------------------
def _interval_text(interval: Any) -> str:
    return f"{interval.point:.2f} [{interval.low:.2f}, {interval.high:.2f}]"


def _table(columns: tuple[str, ...] | int) -> QTableWidget:
    table = QTableWidget(0, columns if isinstance(columns, int) else len(columns))
    if not isinstance(columns, int):
        table.setHorizontalHeaderLabels(columns)
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
    table.verticalHeader().setVisible(False)
    return table


def _item(text: str, tip: str = "", right: bool = False) -> QTableWidgetItem:
    item = QTableWidgetItem(text)
    if tip:
        item.setToolTip(tip)
    if right:
        item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
    return item


class ArenaView(QWidget):
    """The tournaments list and the selected one's progress, standings, crosstable and games."""

    def __init__(self, home: Path | str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.root = Path(home) / "arena"
        self.tournament: Tournament | None = None
        self.tail: GamesTail | None = None
        self.standings: Standings | None = None
        self.scheduled: set[tuple[str, int]] = set()
        self.replays: list[ReplayDialog] = []
        self._token = 0            # the journal's version the newest computation was asked for
        self._busy = False         # a computation is running
        self._stale = False        # the games changed while it ran: compute again when it ends
        self._closed = False
        self._relay = _Relay(self)
        self._relay.done.connect(self._computed, Qt.ConnectionType.QueuedConnection)

        self.list = QListWidget()
        self.list.currentTextChanged.connect(self._select)
        self.header = QLabel("no tournament selected")
        self.header.setWordWrap(True)
        self.progress = QProgressBar()
        self.progress.setFormat("%v / %m games")
        self.progress_label = QLabel()
        self.first_mover = QLabel()
        self.first_mover.setWordWrap(True)
        self.notes = QLabel()
        self.notes.setWordWrap(True)
        self.notes.setStyleSheet("color: #7F7F7F;")
        self.standings_table = _table(STANDING_COLUMNS)
        self.standings_table.horizontalHeader().setStretchLastSection(True)
        self.population_table = _table(POPULATION_COLUMNS)
        self.population_table.horizontalHeader().setStretchLastSection(True)
        self.population_label = QLabel()
        self.population_label.setWordWrap(True)
        self.crosstable = _table(0)
        self.crosstable.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectItems)
        self.crosstable.cellClicked.connect(self._cross_clicked)
        self.pairing = QComboBox()
        self.pairing.currentTextChanged.connect(lambda _t: self._fill_games())
        self.games_table = _table(GAME_COLUMNS)
        self.games_table.horizontalHeader().setStretchLastSection(True)
        self.games_table.horizontalHeader().setResizeContentsPrecision(200)  # fitting columns reads 200 rows
        self.games_table.cellDoubleClicked.connect(self._game_double_clicked)
        self._shown_games: list[dict[str, Any]] = []

        left = QWidget()
        left_box = QVBoxLayout(left)
        left_box.addWidget(QLabel("tournaments"))
        left_box.addWidget(self.list, 1)
        standings = QWidget()
        standings_box = QVBoxLayout(standings)
        standings_box.setContentsMargins(0, 0, 0, 0)
        standings_box.addWidget(QLabel("standings"))
        standings_box.addWidget(self.standings_table, 1)
        population = QWidget()
        population_box = QVBoxLayout(population)
        population_box.setContentsMargins(0, 0, 0, 0)
        population_box.addWidget(QLabel("population: Nash averaging and alpha-Rank with intervals; cycles"))
        population_box.addWidget(self.population_label)
        population_box.addWidget(self.population_table, 1)
        cross = QWidget()
        cross_box = QVBoxLayout(cross)
        cross_box.setContentsMargins(0, 0, 0, 0)
        cross_box.addWidget(QLabel("crosstable: the row player's score against the column player (games); click a "
                                   "cell for its games"))
        cross_box.addWidget(self.crosstable, 1)
        games = QWidget()
        games_box = QVBoxLayout(games)
        games_box.setContentsMargins(0, 0, 0, 0)
        games_top = QHBoxLayout()
        games_top.addWidget(QLabel("games of"))
        games_top.addWidget(self.pairing)
        games_top.addStretch(1)
        games_top.addWidget(QLabel("double-click a game to replay it"))
        games_box.addLayout(games_top)
        games_box.addWidget(self.games_table, 1)
        parts = QSplitter(Qt.Orientation.Vertical)
        for part in (standings, population, cross, games):
            parts.addWidget(part)
        right = QWidget()
        right_box = QVBoxLayout(right)
        right_box.addWidget(self.header)
        progress = QHBoxLayout()
        progress.addWidget(self.progress, 1)
        progress.addWidget(self.progress_label)
        right_box.addLayout(progress)
        right_box.addWidget(self.first_mover)
        right_box.addWidget(parts, 1)
        right_box.addWidget(self.notes)
        split = QSplitter()
        split.addWidget(left)
        split.addWidget(right)
        split.setStretchFactor(1, 4)
        split.setSizes([200, 1000])
        QVBoxLayout(self).addWidget(split)

        self.timer = QTimer(self)
        self.timer.setInterval(REFRESH_MS)
        self.timer.timeout.connect(self._tick)
        self.timer.start()

    def close_view(self) -> None:
        self._closed = True
        self.timer.stop()
        for dialog in list(self.replays):
            dialog.close()

    # -- refreshing ----------------------------------------------------------------------------------
    def _tick(self) -> None:
        if self.isVisible():  # a hidden view catches up when it is shown
            self.refresh()

    def showEvent(self, event: Any) -> None:  # noqa: N802  (Qt's name)
        super().showEvent(event)
        self.refresh()

    def names(self) -> list[str]:
        """The tournaments in the home; a several-game one's games as separate entries, ``NAME/GAME``."""
        return sorted(listed_names(self.root.parent))

    def refresh(self) -> None:
        """The tournaments in the home, then the selected one's journal (if it changed)."""
        self.refresh_names()
        if self.tail is not None and self.tail.read():
            self._games_changed()

    def refresh_names(self) -> None:
        names = self.names()
        wanted = refill_names(self.list, names, self.tournament.name if self.tournament is not None else None)
        if wanted is not None:
            self._select(wanted)
        if not names:
            self.header.setText(f"no tournaments yet in {self.root} (mosaic arena run SPEC)")

    def select(self, name: str) -> None:
        """Show tournament ``name`` (listing the tournaments again if it is new)."""
        self.refresh_names()
        items = self.list.findItems(name, Qt.MatchFlag.MatchExactly)
        if items:
            self.list.setCurrentItem(items[0])

    def _select(self, name: str) -> None:
        self.tournament, self.tail, self.standings = None, None, None
        self._token += 1  # a computation still running for the previous one is dropped when it ends
        for table in (self.standings_table, self.population_table, self.crosstable, self.games_table):
            table.setRowCount(0)
        self.crosstable.setColumnCount(0)
        self._shown_games = []
        for label in (self.progress_label, self.first_mover, self.notes, self.population_label):
            label.clear()
        self.progress.setRange(0, 1)
        self.progress.setValue(0)
        self.pairing.blockSignals(True)
        self.pairing.clear()
        self.pairing.blockSignals(False)
        if not name:
            return
        try:
            self.tournament = Tournament(self.root / name)
        except Exception as exc:  # noqa: BLE001 - a spec another version wrote, a torn file: say so
            self.header.setText(f"{name}: cannot be read ({type(exc).__name__}: {exc})")
            return
        spec = self.tournament.spec
        self.scheduled = {(p, g) for p, g, _f, _s, _seed in spec.schedule()}
        self.pairing.blockSignals(True)
        self.pairing.addItems([ALL_PAIRINGS] + [f"{a}~{b}" for a, b in spec.pairings()])
        self.pairing.blockSignals(False)
        self.progress.setRange(0, max(1, len(self.scheduled)))
        self._show_header()
        self.tail = GamesTail(self.tournament.games_path)
        self.tail.read()
        self._games_changed()

    def _live_settings(self) -> tuple[int, float, int]:
        reps, confidence, seed = report_settings(self.tournament.spec.report if self.tournament is not None else {})
        return min(LIVE_REPS, reps), confidence, seed

    def _show_header(self) -> None:
        assert self.tournament is not None
        spec = self.tournament.spec
        env = spec.environment
        reps, confidence, seed = self._live_settings()
        report_reps = report_settings(spec.report)[0]
        fmt = spec.format + (f" (candidate {spec.candidate})" if spec.candidate else "")
        self.header.setText(
            f"{self.tournament.name}: {env['family']}/{env['env_id']}, {fmt}, {len(spec.players)} players, "
            f"{spec.games_per_pairing} games per pairing (seats alternating, game g seeded {spec.seed} + g). "
            f"Ratings: Bradley–Terry on the Elo scale (mean 1000), {round(confidence * 100)}% intervals from "
            f"{reps} bootstrap resamples (seed {seed}) in this live view"
            + (f"; `mosaic arena report {self.tournament.name}` uses {report_reps}" if report_reps != reps else "")
            + f". · {self.tournament.root}")
        self.header.setToolTip("\n".join(f"{p.label} = {p.target}" for p in spec.players))

    # -- the games changed ---------------------------------------------------------------------------
    def games(self) -> list[dict[str, Any]]:
        return list(self.tail.games.values()) if self.tail is not None else []

    def _games_changed(self) -> None:
        games = self.games()
        done = sum(1 for key in self.tail.games if key in self.scheduled) if self.tail else 0
        total = len(self.scheduled)
        self.progress.setValue(done)
        extra = len(games) - done
        self.progress_label.setText(f"{done} of {total} scheduled games played"
                                    + (f" (+{extra} not in the schedule)" if extra else "")
                                    + (" · finished" if total and done == total else ""))
        self._fill_games()
        self._compute()

    def _compute(self) -> None:
        """Standings for the games now, in the background; one computation at a time, the last one wins."""
        self._token += 1
        if self._busy:
            self._stale = True
            return
        self._busy, self._stale = True, False
        games, (reps, confidence, seed) = self.games(), self._live_settings()
        teams = bool(self.tournament.spec.sides) if self.tournament is not None else False
        in_background(self._relay, self._token, lambda: compute_standings(games, teams, reps, confidence, seed))

    def _computed(self, token: Any, result: Any) -> None:
        self._busy = False
        if self._closed:
            return
        if self._stale or token != self._token:
            if self.tournament is not None and self._stale:
                self._compute()
            else:
                self._stale = False
            return
        if isinstance(result, Exception):
            self.notes.setText(f"the standings could not be computed: {type(result).__name__}: {result}")
            return
        self.standings = result
        self._show_standings()

    def _players(self) -> list[str]:
        return [p.label for p in self.tournament.spec.players] if self.tournament is not None else []

    def _show_standings(self) -> None:
        result = self.standings
        assert result is not None and self.tournament is not None
        pct = round(result.confidence * 100)
        self.standings_table.setHorizontalHeaderItem(STANDING_COLUMNS.index("interval"),
                                                     QTableWidgetItem(f"{pct}% interval"))
        players = self._players()
        rows = result.rows(players)
        self.standings_table.setRowCount(len(rows))
        for row, line in enumerate(rows):
            total, rated, iv, rk = line.record, line.rank is not None, line.interval, line.ranks
            cells = [str(line.rank) if rated else "—", line.player, f"{line.elo:.0f}" if rated else "—",
                     f"[{iv.low:.0f}, {iv.high:.0f}]" if iv is not None else "—",
                     str(total.games) if total else "0", str(total.wins) if total else "0",
                     str(total.draws) if total else "0", str(total.losses) if total else "0",
                     f"{total.score:.3f}" if total else "—"]
            tips = {"rank": f"rank interval {rk.low:.0f}–{rk.high:.0f}; P(best) {line.p_best:.2f}"
                            if rk is not None else "",
                    "score": f"{pct}% Wilson [{total.low:.3f}, {total.high:.3f}]" if total else ""}
            for col, text in enumerate(cells):
                self.standings_table.setItem(row, col, _item(text, tips.get(STANDING_COLUMNS[col], ""),
                                                             right=col not in (1, 3)))
        self._show_crosstable(players)
        first, adv = result.first_mover, result.advantage
        if first is None:
            self.first_mover.setText("first mover: no game yet")
        else:
            self.first_mover.setText(
                f"first mover: scored {first.score:.3f} [{pct}% Wilson {first.low:.3f}, {first.high:.3f}] over "
                f"{first.games} games ({first.wins} W, {first.draws} D, {first.losses} L)"
                + (f"; first-move advantage {adv.point:+.0f} Elo [{adv.low:+.0f}, {adv.high:+.0f}]" if adv is not None
                   else "; first-move advantage: not fitted yet"))
        notes = ([result.why] if result.why else []) + list(result.notes)
        self.notes.setText("\n".join(f"• {n}" for n in notes))
        self._show_population()
        if self.isVisible():
            self.population_table.resizeColumnsToContents()
            self.standings_table.resizeColumnsToContents()
            self.crosstable.resizeColumnsToContents()

    def _show_population(self) -> None:
        """The standings' population measures (computed with them), or why there are none yet."""
        population = self.standings.population if self.standings is not None else None
        rows = population.rows() if population is not None else []
        self.population_table.setRowCount(len(rows))
        if population is None:
            self.population_label.setText("not computed")
            return
        boot = population.boot
        if boot is None:
            self.population_label.setText(f"cannot be told yet: {population.why}")
            return
        pct = round(self.standings.confidence * 100)
        for row, line in enumerate(rows):
            cells = [line.player, _interval_text(line.weight), f"{line.p_support:.0%}", _interval_text(line.rating),
                     _interval_text(line.mass), str(line.rank)]
            tips = {"Nash weight": f"the maximum-entropy Nash equilibrium's weight, {pct}% bootstrap interval",
                    "in support": "share of resamples with the player in the Nash support",
                    "Nash rating": "payoff (log-odds) against the Nash mixture: 0 in the support",
                    "alpha-Rank mass": f"stationary mass at alpha {boot.alpha_rank.alpha:g}, m {boot.alpha_rank.m}"}
            for col, text in enumerate(cells):
                self.population_table.setItem(row, col, _item(text, tips.get(POPULATION_COLUMNS[col], ""),
                                                              right=col != 0))
        cyc = boot.cycles
        shares = [f"{' > '.join([*c, c[0]])} ({s:.0%})" for c, s in boot.cycle_share.items() if c in cyc.cycles]
        sweep = population.sweep
        settles = "" if sweep is None else (
            f"; the alpha-Rank ranking settles from alpha {sweep.settled:.3g}" if sweep.settled is not None
            else "; the alpha-Rank ranking has not settled by alpha 1000")
        told = ("transitive: no cycle" if cyc.transitive else "cycles: " + "; ".join(shares[:5])) \
            + f"; a cycle in {boot.p_cyclic:.0%} of {boot.reps} resamples" + settles
        thin = population.thin
        if thin:
            told += (f". The data cannot tell {len(thin)} pairing(s) with too few games: "
                     + ", ".join(f"{a} vs {b} ({n})" for _g, a, b, n in thin[:6]) + (" ..." if len(thin) > 6 else ""))
        self.population_label.setText(told)

    def _show_crosstable(self, players: list[str]) -> None:
        table = self.standings.table if self.standings is not None else None
        self.crosstable.setRowCount(len(players))
        self.crosstable.setColumnCount(len(players))
        self.crosstable.setHorizontalHeaderLabels(players)
        self.crosstable.setVerticalHeaderLabels(players)
        self.crosstable.verticalHeader().setVisible(True)
        pct = round((self.standings.confidence if self.standings else 0.95) * 100)
        for i, a in enumerate(players):
            for j, b in enumerate(players):
                rec = table.pairs.get((a, b)) if table is not None else None
                if a == b:
                    item = _item("—")
                elif rec is None:
                    item = _item("")
                else:
                    item = _item(f"{rec.score:.2f} ({rec.games})",
                                 f"{a} against {b}: {rec.wins} W, {rec.draws} D, {rec.losses} L; score "
                                 f"{rec.score:.3f}, {pct}% Wilson [{rec.low:.3f}, {rec.high:.3f}]")
                    item.setBackground(score_colour(rec.score))
                    item.setForeground(QColor("#000000"))
                item.setTextAlignment(Qt.AlignmentFlag.AlignCenter)
                self.crosstable.setItem(i, j, item)

    def cross_cell(self, a: str, b: str) -> str:
        """The crosstable's text for ``a`` (row) against ``b`` (column)."""
        players = self._players()
        item = self.crosstable.item(players.index(a), players.index(b))
        return item.text() if item is not None else ""

    def _cross_clicked(self, row: int, column: int) -> None:
        players = self._players()
        if row == column or not (0 <= row < len(players) and 0 <= column < len(players)):
            return
        a, b = players[row], players[column]
        for pairing in (f"{a}~{b}", f"{b}~{a}"):
            index = self.pairing.findText(pairing)
            if index >= 0:
                self.pairing.setCurrentIndex(index)
                return

    # -- games ---------------------------------------------------------------------------------------
    def _fill_games(self) -> None:
        chosen = self.pairing.currentText()
        order = {f"{a}~{b}": n for n, (a, b) in enumerate(self.tournament.spec.pairings())} if self.tournament else {}
        games = sorted((g for g in self.games() if chosen in ("", ALL_PAIRINGS) or g["pairing"] == chosen),
                       key=lambda g: (order.get(g["pairing"], len(order)), g["pairing"], int(g["game"])))
        self._shown_games = games
        self.games_table.setUpdatesEnabled(False)
        self.games_table.setRowCount(len(games))
        for row, g in enumerate(games):
            moves = g.get("moves")
            cells = (g["pairing"], str(g["game"]), str(g.get("seed", "")), str(g.get("first", "")),
                     str(g.get("second", "")), result_text(g), str(g.get("length", "")),
                     "—" if moves is None else str(len(moves)))
            for col, text in enumerate(cells):
                self.games_table.setItem(row, col, _item(text, json.dumps(g.get("returns")) if col == 5 else "",
                                                         right=col in (1, 2, 6, 7)))
        self.games_table.setUpdatesEnabled(True)
        if self.isVisible():
            self.games_table.resizeColumnsToContents()

    def game_at(self, row: int) -> dict[str, Any] | None:
        return self._shown_games[row] if 0 <= row < len(self._shown_games) else None

    def _game_double_clicked(self, row: int, _column: int) -> None:
        game = self.game_at(row)
        if game is not None:
            self.open_replay(game)

    def open_replay(self, game: Mapping[str, Any]) -> ReplayDialog | None:
        """A replay dialog for a journaled game (shown, not modal)."""
        if self.tournament is None:
            return None
        dialog = ReplayDialog(self.tournament.spec.environment, game, self)
        dialog.finished.connect(lambda _r, d=dialog: self._replay_closed(d))
        self.replays.append(dialog)
        dialog.show()
        return dialog

    def _replay_closed(self, dialog: ReplayDialog) -> None:
        if dialog in self.replays:
            self.replays.remove(dialog)
        dialog.deleteLater()  # its frames with it
