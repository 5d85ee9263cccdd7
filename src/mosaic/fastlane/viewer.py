"""``mosaic watch RUN``: the minimal FastLane viewer (snapshot, stats, or a pygame window).

It exists so frames can be seen before the GUI does, and doubles as the
reference reader: discovery through the registry, re-attachment after a
writer restart, and the saved last frame of a finished run.
"""

from __future__ import annotations

import math
import os
import shutil
import sys
import time
from pathlib import Path
from typing import IO, Callable

import numpy as np

from mosaic.errors import UserError
from mosaic.fastlane.follow import StreamFollower
from mosaic.fastlane.png import to_uint8, write_png
from mosaic.fastlane.registry import StreamInfo, discover
from mosaic.run_status import TERMINAL_STATES
from mosaic.runs import RunDir

FINISHED = tuple(state.manifest for state in TERMINAL_STATES)  # manifest spellings
POLL_S = 0.002
REDISCOVER_S = 0.5


class RunStreams:
    """The streams of one run, re-discovered as writers come and go."""

    def __init__(self, run: RunDir, only: str | None = None) -> None:
        self.run, self.only = run, only
        self.followers: dict[str, StreamFollower] = {}
        self.infos: list[StreamInfo] = []
        self._next_discovery = 0.0

    def refresh(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now < self._next_discovery:
            return
        self._next_discovery = now + REDISCOVER_S
        self.infos = [i for i in discover(self.run.root, self.run.run_id) if self.only in (None, i.name)]
        for info in self.infos:
            if info.live and info.name not in self.followers:
                self.followers[info.name] = StreamFollower(info.segment)

    @property
    def live(self) -> list[StreamInfo]:
        return [i for i in self.infos if i.live]

    def finished(self) -> bool:
        """No live stream, and the run says it is over or its streams were closed."""
        if self.live:
            return False
        if self.run.read_manifest().get("status") in FINISHED:
            return True
        return bool(self.infos) and all(i.entry.get("state") == "closed" for i in self.infos)

    def close(self) -> None:
        for follower in self.followers.values():
            follower.close()


def _describe(stream: str, shape: tuple, episode: object, step: object, meta: dict) -> str:
    rewards = meta.get("rewards")
    extra = f", rewards {rewards}" if rewards else ""
    return f"stream {stream}, {'x'.join(map(str, shape))}, episode {episode} step {step}{extra}"


def snapshot(run: RunDir, out: Path, stream: str | None = None, timeout_s: float = 30.0,
             echo: IO[str] = sys.stdout) -> Path:
    """Write the newest frame as a PNG; a finished run gives its saved last frame."""
    streams = RunStreams(run, stream)
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            streams.refresh()
            for name in sorted(streams.followers):
                frame = streams.followers[name].poll()
                if frame is not None:
                    write_png(out, frame.pixels, {"run_id": run.run_id, "stream": name, "index": frame.index,
                                                  "episode": frame.episode, "step": frame.step, **frame.meta})
                    print(f"wrote {out}: {_describe(name, frame.pixels.shape, frame.episode, frame.step, frame.meta)}",
                          file=echo)
                    return out
            saved = [i for i in streams.infos if i.last_frame is not None]
            if not streams.live and saved:
                out.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(saved[0].last_frame, out)
                print(f"wrote {out}: last frame of stream {saved[0].name} (the stream has ended)", file=echo)
                return out
            if time.monotonic() > deadline:
                known = ", ".join(i.name for i in discover(run.root, run.run_id)) or "none"
                raise UserError(f"no FastLane frame from run {run.run_id} within {timeout_s:g} s "
                                f"(streams: {known}; is \"fastlane\": {{\"enabled\": true}} in its config?)")
            time.sleep(POLL_S * 5)
    finally:
        streams.close()


def _fmt(value: float, spec: str) -> str:
    return "-" if isinstance(value, float) and math.isnan(value) else format(value, spec)


def print_stats(run: RunDir, stream: str | None = None, duration_s: float | None = None,
                interval_s: float = 1.0, echo: IO[str] = sys.stdout) -> int:
    """One line per stream per interval until the run ends (or ``duration_s`` passes)."""
    streams = RunStreams(run, stream)
    start = time.monotonic()
    next_print = start + interval_s
    try:
        while True:
            streams.refresh()
            got = False
            for follower in streams.followers.values():
                got = follower.poll() is not None or got
            now = time.monotonic()
            if now >= next_print:
                next_print = now + interval_s
                if not streams.followers:
                    print(f"{run.run_id}: waiting for FastLane streams…", file=echo, flush=True)
                for name, f in sorted(streams.followers.items()):
                    s = f.stats()
                    last = f.last_frame
                    where = f"episode {last.episode} step {last.step}" if last else "no frame yet"
                    print(f"{name:<12} fps {s['fps']:6.1f}  latency {_fmt(s['latency_ms'], '.2f')} ms "
                          f"(max {_fmt(s['latency_max_ms'], '.2f')})  frames {s['frames']}  torn {s['torn']}  "
                          f"{where}", file=echo, flush=True)
            if duration_s is not None and now - start >= duration_s:
                return 0
            if streams.finished():
                print(f"{run.run_id}: no live streams; the run has ended", file=echo, flush=True)
                return 0
            if not got:
                time.sleep(POLL_S)
    finally:
        streams.close()


def has_display() -> bool:
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
                or os.environ.get("SDL_VIDEODRIVER"))


def window(run: RunDir, stream: str | None = None, duration_s: float | None = None,
           echo: IO[str] = sys.stdout) -> int:
    """A pygame window with the newest frame; Tab cycles streams, Esc or q closes."""
    if not has_display():
        raise UserError("no display here (DISPLAY is not set): use --snapshot out.png or --stats")
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
    try:
        import pygame
    except ImportError:
        raise UserError("the window needs pygame (pip install pygame); --snapshot and --stats work without") from None
    streams = RunStreams(run, stream)
    pygame.init()
    screen, shown, start = None, 0, time.monotonic()
    try:
        while True:
            streams.refresh()
            names = sorted(streams.followers)
            for event in pygame.event.get():
                if event.type == pygame.QUIT or (event.type == pygame.KEYDOWN and event.key in (pygame.K_ESCAPE, pygame.K_q)):
                    return 0
                if event.type == pygame.KEYDOWN and event.key == pygame.K_TAB and names:
                    shown = (shown + 1) % len(names)
            frame = streams.followers[names[shown % len(names)]].poll() if names else None
            if frame is not None:
                screen = _draw(pygame, screen, frame.pixels)
                fps = streams.followers[names[shown % len(names)]].stats()["fps"]
                pygame.display.set_caption(f"MOSAIC {run.run_id} · {names[shown % len(names)]} · "
                                           f"episode {frame.episode} step {frame.step} · {fps:.0f} fps")
            elif streams.finished():
                print(f"{run.run_id}: the run has ended", file=echo)
                return 0
            else:
                time.sleep(POLL_S * 4)
            if duration_s is not None and time.monotonic() - start >= duration_s:
                return 0
    finally:
        streams.close()
        pygame.quit()


def _draw(pygame: object, screen: object, pixels: np.ndarray) -> object:
    image = to_uint8(pixels)
    if image.shape[2] == 1:
        image = np.repeat(image, 3, axis=2)
    image = image[:, :, :3]
    h, w = image.shape[:2]
    scale = max(1, 480 // max(h, w))  # small frames (84x84) are shown bigger
    size = (w * scale, h * scale)
    if screen is None or screen.get_size() != size:
        screen = pygame.display.set_mode(size)
    surface = pygame.surfarray.make_surface(np.ascontiguousarray(image.swapaxes(0, 1)))
    if scale > 1:
        surface = pygame.transform.scale(surface, size)
    screen.blit(surface, (0, 0))
    pygame.display.flip()
    return screen


def watch(run: RunDir, stream: str | None = None, snapshot_path: str | None = None, stats: bool = False,
          timeout_s: float = 30.0, duration_s: float | None = None,
          echo: IO[str] = sys.stdout, show: Callable[..., int] | None = None) -> int:
    """What ``mosaic watch`` does with its flags."""
    try:
        enabled = (run.read_config().get("fastlane") or {}).get("enabled")
    except (OSError, ValueError, AttributeError):
        enabled = None
    if enabled is False and not discover(run.root, run.run_id):
        raise UserError(f"run {run.run_id} was started without FastLane; set \"fastlane\": {{\"enabled\": true}} "
                        "in its config to watch it")
    if snapshot_path:
        snapshot(run, Path(snapshot_path), stream, timeout_s, echo)
        return 0
    if stats:
        return print_stats(run, stream, duration_s, echo=echo)
    return (show or window)(run, stream, duration_s, echo)
