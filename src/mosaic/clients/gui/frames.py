"""Live FastLane frames of a run: one image per stream, read from shared memory on the UI thread.

A run's streams are found by name in ``/dev/shm`` (and its registry in the
run folder); each is followed with :class:`~mosaic.fastlane.follow.StreamFollower`
on a timer (30 fps at most). When a stream's segment is gone (the run ended),
its last frame kept in the run folder is shown.

Frames are painted by :class:`FrameCanvas`, an opaque widget that draws the
image scaled straight into its own rectangle: a new frame repaints that
rectangle and nothing around it (a ``QLabel`` pixmap repainted the tab pages
behind it and converted every frame to a pixmap first). The caption under it
changes a few times a second at most and has a fixed height, so it never asks
the window for a new layout.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import time

from PySide6.QtCore import QRect, QSize, Qt, QTimer
from PySide6.QtGui import QColor, QImage, QPainter
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QSizePolicy, QVBoxLayout, QWidget

from mosaic.fastlane.follow import StreamFollower
from mosaic.fastlane.png import read_png
from mosaic.fastlane.registry import last_frame_path, read_registry
from mosaic.fastlane.shm import list_segments, parse_segment_name, segment_name

MAX_FPS = 30
CAPTION_EVERY_S = 0.25  # the caption's text changes at most this often


def to_qimage(pixels: np.ndarray, copy: bool = True) -> QImage:
    """An RGB (or grey, or RGBA) uint8 array as a QImage.

    With ``copy`` the image owns a copy of the pixels; without, it reads the array's
    memory, which the caller keeps alive (and unchanged) as long as the image is used.
    """
    pixels = np.ascontiguousarray(pixels)
    if pixels.dtype != np.uint8:
        pixels = np.clip(pixels, 0, 255).astype(np.uint8)
    if pixels.ndim == 2:
        pixels = np.ascontiguousarray(np.repeat(pixels[:, :, None], 3, axis=2))
    height, width, channels = pixels.shape
    fmt = {3: QImage.Format.Format_RGB888, 4: QImage.Format.Format_RGBA8888}.get(channels)
    if fmt is None:
        pixels = np.ascontiguousarray(np.repeat(pixels[:, :, :1], 3, axis=2))
        channels, fmt = 3, QImage.Format.Format_RGB888
    image = QImage(pixels.data, width, height, width * channels, fmt)
    return image.copy() if copy else image


class FrameCanvas(QWidget):
    """One frame, scaled to fit (aspect kept) on black, or a line of text when there is none."""

    def __init__(self, placeholder: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAttribute(Qt.WidgetAttribute.WA_OpaquePaintEvent)  # paints every pixel itself
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.setMinimumSize(200, 200)
        self.placeholder = placeholder
        self._image: QImage | None = None
        self._pixels: np.ndarray | None = None  # the memory _image reads

    def sizeHint(self) -> QSize:  # noqa: N802  (Qt's name)
        return QSize(600, 600)

    def set_frame(self, pixels: np.ndarray) -> None:
        pixels = np.ascontiguousarray(pixels)
        self._image = to_qimage(pixels, copy=False)
        self._pixels = pixels
        self.update()

    def target(self) -> QRect:
        """Where the frame goes: as large as fits, centred, aspect kept."""
        if self._image is None:
            return QRect()
        size = self._image.size().scaled(self.size(), Qt.AspectRatioMode.KeepAspectRatio)
        return QRect((self.width() - size.width()) // 2, (self.height() - size.height()) // 2,
                     size.width(), size.height())

    def paintEvent(self, _event: object) -> None:  # noqa: N802  (Qt's name)
        painter = QPainter(self)
        painter.fillRect(self.rect(), QColor("black"))
        if self._image is None:
            painter.setPen(QColor("lightgray"))
            painter.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter | Qt.TextFlag.TextWordWrap, self.placeholder)
        else:
            painter.drawImage(self.target(), self._image)
        painter.end()


class FramesView(QWidget):
    """The frames of one run: pick a stream, see it live, with the episode's running returns."""

    def __init__(self, run_id: str, run_dir: str | Path | None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.run_id = run_id
        self.run_dir = Path(run_dir) if run_dir else None
        self.follower: StreamFollower | None = None
        self.frames_shown = 0
        self.streams = QComboBox()
        self.streams.currentTextChanged.connect(self._switch)
        self.image = FrameCanvas("no frames yet: runs stream frames with fastlane.enabled")
        self.caption = QLabel()
        self.caption.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.caption.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
        self.caption.setFixedHeight(self.caption.fontMetrics().height() * 2 + 4)
        self.caption.setWordWrap(True)
        self._caption_at = 0.0
        top = QHBoxLayout()
        top.addWidget(QLabel("stream"))
        top.addWidget(self.streams, 1)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.image, 1)
        layout.addWidget(self.caption)
        self.timer = QTimer(self)
        self.timer.setInterval(int(1000 / MAX_FPS))
        self.timer.timeout.connect(self.tick)
        self._ticks = 0

    def start(self) -> None:
        self.refresh_streams()
        self.timer.start()

    def stop(self) -> None:
        self.timer.stop()
        if self.follower is not None:
            self.follower.close()
            self.follower = None

    def known_streams(self) -> list[str]:
        live = [parse_segment_name(name)[1] for name in list_segments(self.run_id)]
        kept = list(read_registry(self.run_dir)["streams"]) if self.run_dir else []
        return sorted(set(live) | set(kept))

    def refresh_streams(self) -> None:
        found = self.known_streams()
        current = [self.streams.itemText(i) for i in range(self.streams.count())]
        for name in found:
            if name not in current:
                self.streams.addItem(name)

    def _switch(self, stream: str) -> None:
        if self.follower is not None:
            self.follower.close()
            self.follower = None
        if not stream:
            return
        segment = segment_name(self.run_id, stream)
        if segment in list_segments(self.run_id):
            self.follower = StreamFollower(segment)
        else:
            self.show_last_frame(stream)

    def show_last_frame(self, stream: str) -> bool:
        if self.run_dir is None:
            return False
        path = last_frame_path(self.run_dir, stream)
        if not path.exists():
            return False
        pixels, meta = read_png(path)
        self.display(pixels, f"last frame of {stream} (the stream has ended)", meta, caption_now=True)
        return True

    def display(self, pixels: np.ndarray, title: str, meta: dict | None = None, caption_now: bool = False) -> None:
        self.image.set_frame(pixels)
        self.frames_shown += 1
        now = time.monotonic()
        if caption_now or now - self._caption_at >= CAPTION_EVERY_S:
            self._caption_at = now
            returns = (meta or {}).get("returns") or {}
            shown = ", ".join(f"{agent} {value:.2f}" for agent, value in list(returns.items())[:8])
            self.caption.setText(f"{title}" + (f" · returns this episode: {shown}" if shown else ""))

    def tick(self) -> None:
        if not self.isVisible():  # frames nobody sees are not read
            return
        self._ticks += 1
        if self._ticks % MAX_FPS == 1:  # about once a second: new streams, ended ones
            self.refresh_streams()
        if self.follower is None:
            if self.streams.currentText() and self.frames_shown == 0:
                self._switch(self.streams.currentText())
            return
        frame = self.follower.poll()
        if frame is not None:
            self.display(frame.pixels, f"{self.streams.currentText()} · episode {frame.episode} step {frame.step}",
                      frame.meta)
        elif not self.follower.attached and self.run_dir is not None:
            stream = self.streams.currentText()
            if stream not in self.known_live():
                self.follower.close()
                self.follower = None
                self.show_last_frame(stream)

    def known_live(self) -> list[str]:
        return [parse_segment_name(name)[1] for name in list_segments(self.run_id)]
