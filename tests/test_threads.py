"""Torch's thread count in a worker process: set when asked, torch's own otherwise."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from mosaic.workerkit.threads import thread_env

PROBE = """
import json, os, sys
from mosaic.workerkit.threads import limit_torch_threads
import torch
default = torch.get_num_threads()
limit_torch_threads(json.loads(sys.argv[1]))
print(json.dumps({"default": default, "now": torch.get_num_threads(),
                  "env": {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}}))
"""


def probe(value) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", PROBE, json.dumps(value)], capture_output=True, text=True,
                         env=env, check=True)
    return json.loads(out.stdout)


def test_a_count_is_applied_to_torch_and_to_later_children():
    seen = probe(1)
    assert seen["now"] == 1
    assert seen["env"] == {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def test_none_leaves_torchs_own_choice():
    seen = probe(None)
    assert seen["now"] == seen["default"] >= 1
    assert seen["env"] == {"OMP_NUM_THREADS": None, "MKL_NUM_THREADS": None}


@pytest.mark.parametrize("value,expected", [(None, {}), (3, {"OMP_NUM_THREADS": "3", "MKL_NUM_THREADS": "3"})])
def test_thread_env_for_child_processes(value, expected):
    assert thread_env(value) == expected
