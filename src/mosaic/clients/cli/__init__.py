"""The ``mosaic`` command line, one module per command group.

User mistakes print one ``mosaic: error: ...`` line and exit with code 2;
a failed run exits 1 and a cancelled one 3.
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from mosaic import __version__
from mosaic.clients.cli import arena, daemon, envs, experiment, fastlane, gui, players, runs, workers
from mosaic.clients.cli.common import apply_overrides
from mosaic.errors import UserError

__all__ = ["apply_overrides", "build_parser", "main"]


class OneLineParser(argparse.ArgumentParser):
    """argparse's parser whose mistakes read like every other: one ``mosaic: error:`` line, exit 2 (argparse's
    own prints its usage first and names the subcommand, ``mosaic show: error:``). Subcommands inherit it."""

    def error(self, message: str):  # type: ignore[override]  (argparse's signature: it never returns)
        self.exit(2, f"mosaic: error: {message} (`{self.prog} --help` lists what it takes)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="mosaic", description="MOSAIC multi-agent RL platform: train, compare and "
                           "evaluate runs of several RL libraries (workers) through one command line.",
                           epilog="New here? docs/getting-started.md walks through a first run, its results, an "
                                  "experiment and the GUI. `mosaic COMMAND --help` describes each command.")
    parser.add_argument("--version", action="version", version=f"mosaic {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for group in (workers, runs, experiment, arena, players, fastlane, daemon, envs, gui):
        group.add_parsers(sub)
    return parser


def _unknown_options(parser: argparse.ArgumentParser, args: argparse.Namespace, extra: list[str],
                     argv: list[str]) -> None:
    """Arguments no parser took. On a command that takes ``--set``, ``--total-timesteps 4000`` is a config field
    written as an option: say how to set it (``--set total_timesteps=4000``); ``--set KEY VALUE`` lacks its ``=``."""
    from mosaic.clients.cli.common import check_set_items

    flag = extra[0] if extra else ""
    if hasattr(args, "set"):
        check_set_items(args.set, argv)
    options = _options_of(parser, getattr(args, "command", None))
    if flag.startswith("--") and options:
        import difflib

        close = difflib.get_close_matches(flag.split("=")[0], options, n=1, cutoff=0.75)
        if close:  # a misspelt option of the command, not a config field
            parser.error(f"unrecognized arguments: {' '.join(extra)} (did you mean {close[0]}?)")
    if hasattr(args, "set") and flag.startswith("--") and len(flag) > 2:
        name, sep, value = flag[2:].partition("=")
        if not sep:  # the value that followed it (argparse may have taken it for the config)
            at = argv.index(flag) if flag in argv else -1
            following = argv[at + 1] if 0 <= at < len(argv) - 1 else ""
            value = following if following and not following.startswith("-") else "VALUE"
        path = name.replace("-", "_")
        raise UserError(f"{flag}: not an option of `mosaic {args.command}`; a config field is set with "
                        f"--set {path}={value} (`mosaic workers show WORKER` lists the fields)")
    parser.error(f"unrecognized arguments: {' '.join(extra)}")


def _options_of(parser: argparse.ArgumentParser, command: str | None) -> list[str]:
    """The long options of subcommand ``command`` (empty when it has none, or is not found)."""
    for action in parser._subparsers._group_actions if parser._subparsers else ():  # noqa: SLF001 (argparse's own)
        sub = getattr(action, "choices", {}).get(command) if command else None
        if sub is not None:
            return [o for o in sub._option_string_actions if o.startswith("--")]  # noqa: SLF001
    return []


def main(argv: Sequence[str] | None = None) -> int:
    import os

    if not os.environ.get("MOSAIC_HOME"):  # the default home, the same for every process this command starts
        from mosaic.runs import default_home

        os.environ["MOSAIC_HOME"] = str(default_home())
    try:
        parser = build_parser()
        args, extra = parser.parse_known_args(argv)  # inside: an argument's own check may raise UserError
        if extra:
            _unknown_options(parser, args, extra, list(sys.argv[1:] if argv is None else argv))
        args.argv = list(sys.argv[1:] if argv is None else argv)
        return args.func(args)
    except UserError as exc:  # one prefix, also where the message carries a child command's own refusal
        print(f"mosaic: error: {str(exc).replace('mosaic: error: ', '')}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
