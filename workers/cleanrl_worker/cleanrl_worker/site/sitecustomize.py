"""Runs at the start of the CleanRL script's interpreter (``PYTHONPATH`` points here).

It only installs observers (``cleanrl_worker.child``) when the MOSAIC runtime
asked for them; the script itself is run unmodified.
"""

import os

if os.environ.get("MOSAIC_CLEANRL_FD"):
    from cleanrl_worker import child

    child.install()
