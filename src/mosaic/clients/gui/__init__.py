"""MOSAIC's desktop GUI (Qt 6 through PySide6): ``mosaic gui``.

It talks only to the trainer daemon (starting one for the current
``MOSAIC_HOME`` when none serves it) and reads FastLane segments for frames;
it never imports a worker, so workers in environments of their own get their
forms from the schemas they describe. Needs the ``gui`` extra.
"""

import os

# Qt's raster painter hands large fills and polygons to a pool of helper threads and waits
# for them. While training runs keep every core busy, those helpers wait for a core and the
# UI thread waits for them: the bench saw 0.3-0.7 s stalls drawing plot axes with the UI
# thread itself 7% busy. Painting on the UI thread alone keeps it responsive. Read by Qt
# once, before the first paint: a user's own setting wins.
os.environ.setdefault("QT_NO_GUI_THREADPOOL", "1")
