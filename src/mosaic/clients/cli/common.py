"""What the command groups share: tables, config overrides, event lines, run rows, the daemon client."""

from __future__ import annotations

import json
import time
from typing import Any

from mosaic.errors import UserError
from mosaic.runs import RunDir, RunStore


def _table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    lines = [fmt.format(*header), fmt.format(*("-" * w for w in widths))]
    lines += [fmt.format(*map(str, r)) for r in rows]
    return "\n".join(line.rstrip() for line in lines)


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """``--set total_timesteps=400``: values are JSON, else plain strings."""
    from mosaic.configkit import set_path

    for item in overrides:
        path, sep, raw = item.partition("=")
        if not sep or not path or any(not part for part in path.split(".")):
            raise UserError(f"--set: expected KEY.PATH=VALUE, got {item!r}")
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw
        set_path(data, path, value, "--set")
    return data


def _format_event(e: dict[str, Any]) -> str:
    stamp = time.strftime("%H:%M:%S", time.localtime(e.get("ts", 0)))
    body = {k: v for k, v in e.items() if k not in ("v", "type", "run_id", "seq", "ts")}
    if e.get("type") == "log":
        return f"{stamp} #{e.get('seq')} log[{e.get('level')}] {e.get('message', '')}"
    return f"{stamp} #{e.get('seq')} {e.get('type')} {json.dumps(body, default=str)}"


#: The columns of `mosaic runs`, with or without a daemon.
RUN_COLUMNS = ["RUN", "STATUS", "WORKER", "ENV", "ALGORITHM", "SEED", "PROGRESS", "RETURN"]


def _config_of(run: RunDir) -> dict[str, Any]:
    try:
        return run.read_config()
    except (OSError, ValueError):
        return {}


def progress_text(summary: Any, metrics: dict[str, Any], target: int | None = None) -> str:
    """``done/budget unit`` from the last metrics and the config's budget (``-`` when neither is known).
    ``target``: the env steps the run said up front it takes instead of ``total_timesteps`` (a library that steps
    its budget in whole units, :func:`rounded_target`): the target shown."""
    unit = summary.budget_unit or "env steps"
    done = metrics.get("episodes_total") if unit == "episodes" else metrics.get("timesteps_total")
    budget = target if target is not None and unit == "env steps" else summary.budget
    if done is None and budget is None:
        return "-"
    shown = "-" if done is None else str(done)
    return f"{shown}/{budget} {unit}" if budget is not None else f"{shown} {unit}"


#: Lines at the start of a run's telemetry searched for the rounded budget its worker states after run_started.
_ROUNDED_LINES = 40


def rounded_target(run: RunDir) -> int | None:
    """The env steps a run said up front it takes instead of its ``total_timesteps`` (its library steps the budget
    in whole units: a warning with ``requested_timesteps`` and ``env_steps`` just after ``run_started``); None
    when it said none."""
    try:
        with run.telemetry_path.open("rb") as fh:
            for _, line in zip(range(_ROUNDED_LINES), fh):
                if b"requested_timesteps" not in line:
                    continue
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                steps = event.get("env_steps")
                if event.get("type") == "log" and isinstance(steps, int) and not isinstance(steps, bool):
                    return steps
    except OSError:
        return None
    return None


def return_text(metrics: dict[str, Any]) -> str:
    """The RETURN column: the mean episode return (the sum over agents), or, in a zero-sum game, where that sum is 0
    by construction, each agent's mean (``player_0 +0.120, player_1 -0.120``)."""
    from mosaic.workerkit.episode_stats import return_label

    return return_label(metrics, 3) or "-"


def listing_row(run_id: str, status: str, summary: Any, metrics: dict[str, Any],
                target: int | None = None) -> list[str]:
    """One row of :data:`RUN_COLUMNS`: every field read from the shared vocabulary."""
    return [run_id, status, summary.worker or "?", summary.env_id or "?", summary.algorithm or "-",
            "-" if summary.seed is None else str(summary.seed), progress_text(summary, metrics, target),
            return_text(metrics)]


def _summary_row(run: RunDir) -> list[str]:
    from mosaic.workerkit.run_fields import summarize

    m = run.read_manifest()
    summary = summarize(_config_of(run), worker=m.get("worker", ""))
    return listing_row(run.run_id, m.get("status", "?"), summary, run.last_event("metrics") or {},
                       rounded_target(run))


def experiment_runs(home: Any) -> dict[str, str]:
    """Run id -> the experiment whose cell it is, for every attempt the experiments of ``home`` journaled."""
    from mosaic.experiments.store import ExperimentStore

    store, out = ExperimentStore(home), {}
    try:
        names = store.names()
    except OSError:
        return {}
    for name in names:
        try:
            cells = store.get(name).cells()
        except (OSError, ValueError, UserError):
            continue
        for cell in cells.values():
            for attempt in cell.attempts:
                out[attempt.run_id] = name
    return out


def tournament_of(config: dict[str, Any]) -> str | None:
    """The tournament a run plays games of (an arena shard run: worker ``arena``), else None."""
    spec = config.get("tournament")
    if config.get("worker") != "arena" or not isinstance(spec, dict):
        return None
    return str(spec.get("name") or "?")


def _daemon_client(required: bool = False) -> Any:
    """A client of the daemon serving this MOSAIC_HOME, or None when none runs."""
    import importlib.util

    from mosaic.host.daemon.endpoint import find_daemon  # looking needs no gRPC

    home = RunStore().home
    endpoint = find_daemon(home)
    if endpoint is None:
        if required:
            raise UserError(f"no daemon serves MOSAIC_HOME={home}; start one with `mosaic daemon` "
                            "(or run in the foreground with `mosaic run`)")
        return None
    if importlib.util.find_spec("grpc") is None:
        raise UserError("a daemon serves this MOSAIC_HOME, but talking to it needs the 'daemon' extra: "
                        "pip install 'mosaic-marl[daemon]'")
    from mosaic.host.daemon.client import DaemonClient

    return DaemonClient.for_endpoint(endpoint, home)


# -- mistakes named for what they are ------------------------------------------------------------------------------
def check_set_items(items: list[str], argv: list[str] | None = None) -> None:
    """``--set KEY VALUE`` (a space, not ``=``): argparse takes VALUE for the next argument (the config), and the
    mistake would read as a missing file. ``argv``: the command line, where the VALUE that followed is found."""
    argv = list(argv or [])
    for item in items:
        if "=" in item:
            continue
        following = ""
        for at in range(len(argv) - 2):
            if argv[at] == "--set" and argv[at + 1] == item and not argv[at + 2].startswith("-"):
                following = argv[at + 2]
        hint = f"; write --set {item}={following} (no space)" if following else ""
        raise UserError(f"--set: expected KEY.PATH=VALUE, got {item!r}: the '=' is missing{hint}")


def yaml_syntax(path: str, what: str) -> None:
    """A YAML file's syntax error, named with its line and column (1-based), before anything reads the file."""
    if not str(path).lower().endswith((".yaml", ".yml")):
        return
    try:
        import yaml

        text = open(path, encoding="utf-8").read()
    except (ImportError, OSError, UnicodeDecodeError):
        return  # the reader says what is wrong
    try:
        yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        said = " ".join(part for part in (exc.context, exc.problem) if part)
        raise UserError(f"{what}: {path!r} is not valid YAML{where}: {said}") from None
    except yaml.YAMLError:
        return


#: What each kind of file is run with.
KIND_COMMANDS = {"run config": "mosaic run CONFIG", "experiment spec": "mosaic experiment run SPEC",
                 "tournament spec": "mosaic arena run SPEC"}


def file_kind(data: Any) -> str | None:
    """Which kind of MOSAIC file ``data`` looks like, by the fields only that kind has; None when none is sure."""
    if not isinstance(data, dict):
        return None
    if "worker" in data:  # only a run config names its worker at the top (an LLM evaluation's has players too)
        return "run config"
    if "players" in data or ("games" in data and isinstance(data.get("games"), dict)):
        return "tournament spec"
    if "base" in data or "axes" in data or "seeds" in data or "study" in data:
        return "experiment spec"
    if "algorithm" in data or "total_timesteps" in data:
        return "run config"
    return None


def refuse_other_kind(path: str, data: Any, wanted: str, field: str) -> None:
    """``data`` (read from ``path``) is another kind of file than ``wanted``: say what it is and which command
    takes it, exit 2."""
    kind = file_kind(data)
    if kind is not None and kind != wanted:
        command = KIND_COMMANDS[kind].rsplit(" ", 1)[0]
        hint = {"tournament spec": "its 'players'", "experiment spec": "its 'base', 'axes' or 'seeds'",
                "run config": "its 'worker', 'algorithm' or 'total_timesteps'"}[kind]
        raise UserError(f"{field}: {path!r} is {'an' if kind[0] in 'aeiou' else 'a'} {kind} ({hint}), not "
                        f"{'an' if wanted[0] in 'aeiou' else 'a'} {wanted}; run it with `{command} {path}`")


class HelpFormatter(__import__("argparse").HelpFormatter):
    """argparse's help, whose description and epilog keep their line breaks: a paragraph is wrapped to the
    terminal, a line starting with spaces (an example command) is printed as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        import textwrap

        out = []
        for line in text.splitlines():
            out.append(indent + line if line.startswith(" ") or not line.strip()
                       else textwrap.fill(line, width, initial_indent=indent, subsequent_indent=indent))
        return "\n".join(out)


def fitted_table(rows: list[list[str]], header: list[str], wrap: set[int], width: int | None = None) -> str:
    """:func:`_table` within ``width`` characters (default: the terminal's, ``COLUMNS`` when set): the columns in
    ``wrap`` (comma-separated lists) are narrowed, widest first, and their cells wrapped after a comma onto more
    lines; the other columns keep their width."""
    import shutil
    import textwrap

    width = width or shutil.get_terminal_size((100, 24)).columns
    rows = [[", ".join(v.strip() for v in str(c).split(",")) if i in wrap else str(c) for i, c in enumerate(r)]
            for r in rows]
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
    # narrowed down to their longest item first (no word broken); only if that is not enough, further
    items = {i: max([len(header[i])] + [len(v.strip()) + 1 for r in rows for v in r[i].split(",")]) for i in wrap}
    for floor in (items, {i: max(len(header[i]), 8) for i in wrap}):
        while sum(widths) + 2 * (len(widths) - 1) > width:
            shrinkable = [i for i in wrap if widths[i] > floor[i]]
            if not shrinkable:
                break
            widths[max(shrinkable, key=lambda i: widths[i])] -= 1
    if all(widths[i] >= max(len(str(r[i])) for r in rows) for i in wrap if rows):
        return _table(rows, header)

    def cell_lines(text: str, i: int) -> list[str]:
        """The cell on lines of at most the column's width, broken after a comma (inside an item only where one
        item is wider than the column)."""
        if i not in wrap or len(text) <= widths[i]:
            return [text]
        items = [v.strip() for v in text.split(",")]
        lines: list[str] = []
        for k, item in enumerate(items):
            piece = item + ("," if k < len(items) - 1 else "")
            if lines and len(lines[-1]) + 1 + len(piece) <= widths[i]:
                lines[-1] += " " + piece
            elif len(piece) <= widths[i] + 1:  # its comma may stand in the gap before the next column
                lines.append(piece)
            else:
                lines += textwrap.wrap(piece, widths[i], break_on_hyphens=False) or [""]
        return lines

    def joined(cells: list[str]) -> str:  # a cell one wider than its column (its comma) takes one space of the gap
        return "".join(c.ljust(w) + " " * (2 - max(0, len(c) - w)) for c, w in zip(cells, widths))

    lines = [joined(header), joined(["-" * w for w in widths])]
    for row in rows:
        cells = [cell_lines(str(c), i) for i, c in enumerate(row)]
        for k in range(max(len(c) for c in cells)):
            lines.append(joined([c[k] if k < len(c) else "" for c in cells]))
    return "\n".join(line.rstrip() for line in lines)
