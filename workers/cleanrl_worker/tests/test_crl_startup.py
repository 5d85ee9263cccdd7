"""Inside the CleanRL script's process: its imports and set-up run with the cyclic garbage collector
paused, its training with the collector on (mosaic.workerkit.startup), from the first scalar it logs."""

from __future__ import annotations

import json

PROBE = """
import gc, json, os
read, write = os.pipe()
os.environ["MOSAIC_CLEANRL_FD"] = str(write)
from cleanrl_worker import child
seen = {"before": gc.isenabled()}
child.install()  # what site/sitecustomize.py calls before the script starts
seen["installed"] = gc.isenabled()
from torch.utils.tensorboard import SummaryWriter  # the script's imports and set-up
import torch
optimiser = torch.optim.Adam([torch.zeros(2, requires_grad=True)])
writer = SummaryWriter(LOGDIR)
seen["set_up"] = gc.isenabled()
writer.add_scalar("charts/learning_rate", 0.001, 0)
seen["logged"] = gc.isenabled()
seen["frozen"] = gc.get_freeze_count()
print(json.dumps(seen))
"""


def test_the_script_sets_up_with_the_collector_paused_and_trains_with_it_on(home, tmp_path):
    seen = json.loads(home.probe(f"LOGDIR = {str(tmp_path / 'runs')!r}\n" + PROBE)[-1])
    assert seen["before"] and not seen["installed"] and not seen["set_up"], seen
    assert seen["logged"] and seen["frozen"] > 10_000, seen
