"""Make the tiny random model (``mosaic.testing.tiny_model``) with the words of this worker's prompts.

Run with the worker environment's interpreter: ``python tiny_model.py DIR``.
"""

from __future__ import annotations

import sys

from balrog_worker.text import ACTIONS, system_prompt
from mosaic.testing.tiny_model import make

CORPUS = [system_prompt("MiniGrid-Empty-5x5-v0"), *ACTIONS, "ACTION : go forward turn left",
          "Mission : get to the green goal square You see : a wall 1 step forward steps left right",
          "You carry nothing . What do you do ? red green blue purple yellow grey ball key box door goal"]

if __name__ == "__main__":
    make(sys.argv[1], CORPUS)
