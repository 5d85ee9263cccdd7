"""Runs at the start of the CleanRL script's interpreter (``PYTHONPATH`` points here).

When the MOSAIC runtime asked for them it installs the observers
(``cleanrl_worker.child``); without it (the script run directly) only the
registration of ALE's ``NoFrameskip-v4`` ids with gym 0.23.1, which ppo_atari.py
and c51_atari.py need (``cleanrl_worker.gym_atari``). The script itself is run
unmodified.
"""

import os

from cleanrl_worker import child

if os.environ.get("MOSAIC_CLEANRL_FD"):
    child.install()
else:
    child.install_registration()
