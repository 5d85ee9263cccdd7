"""MOSAIC's desktop GUI (Qt 6 through PySide6): ``mosaic gui``.

It talks only to the trainer daemon (starting one for the current
``MOSAIC_HOME`` when none serves it) and reads FastLane segments for frames;
it never imports a worker, so workers in environments of their own get their
forms from the schemas they describe. Needs the ``gui`` extra.
"""
