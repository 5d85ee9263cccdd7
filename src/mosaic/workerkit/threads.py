"""How many threads torch (OpenMP, MKL) may use inside a worker process.

Torch sizes its intra-op pool to the machine's cores. For the small networks of
MARL research that buys nothing when the machine is idle, and it is a disaster when
it is not: the pool's threads wait for each other at every operation, and when
another process holds a core they wait for the scheduler. Measured on a 2-core
machine with two other busy processes, a 2-layer, 64-unit MLP forward on a batch of
2 took 13-31 ms with 2 threads and 55 us with 1; an RLlib PPO iteration of 2000 steps
went from 8 s to 80 s. Ray already gives its env runner actors one thread each; a
worker's own process (RLlib's driver with its local learner and sampler, evaluation)
or a child script gets what its config says.

``None`` everywhere means torch's own choice, as the library does when run directly.
"""

from __future__ import annotations

import os

VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


def thread_env(num_threads: int | None) -> dict[str, str]:
    """Environment variables that give a child process ``num_threads`` threads ({} for torch's choice)."""
    return {} if num_threads is None else dict.fromkeys(VARIABLES, str(num_threads))


def limit_torch_threads(num_threads: int | None) -> None:
    """Give this process (and the children it starts later) ``num_threads`` torch threads."""
    if num_threads is None:
        return
    os.environ.update(thread_env(num_threads))
    import torch

    torch.set_num_threads(num_threads)
