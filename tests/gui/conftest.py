"""GUI tests: real Qt widgets, offscreen (no display needed), a real daemon where the GUI needs one."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
