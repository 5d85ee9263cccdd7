"""XuanCe used directly, as its users write it, for the transparency test.

    python xuance_direct.py ALGO '{"option": value, ...}' [--seed-action-spaces] [--timing]

Builds XuanCe's own MPE env (``env_name: mpe``) and agent from its yaml and the
given options, trains, and prints every finished episode's per-agent returns
(through XuanCe's own callback hook) as one JSON list on the last line.
``--seed-action-spaces`` seeds every env's action spaces as MOSAIC's env
adapter does (PettingZoo leaves them unseeded, so XuanCe's epsilon-greedy
exploration differs from run to run otherwise). ``--timing`` also prints, on the
line before, the env steps and the seconds ``agent.train`` took.
"""

import json
import os
import sys
import time
from argparse import Namespace

os.environ.setdefault("TQDM_DISABLE", "1")

import torch  # noqa: E402
from xuance.common import get_arguments  # noqa: E402
from xuance.common.callback import MultiAgentBaseCallback  # noqa: E402
from xuance.environment import make_envs  # noqa: E402
from xuance.torch.agents import REGISTRY_Agents  # noqa: E402

algo, options = sys.argv[1], json.loads(sys.argv[2])
torch.set_num_threads(1)
args = get_arguments(algo, "mpe", "simple_spread_v3", parser_args=Namespace(**options))
episodes = []


class Record(MultiAgentBaseCallback):
    def on_train_episode_info(self, **kwargs):
        info = kwargs["infos"][kwargs["env_id"]]
        episodes.append({k: float(v) for k, v in info["episode_score"].items()})


envs = make_envs(args)
if "--seed-action-spaces" in sys.argv:
    for index, env in enumerate(envs.envs):
        for i, agent in enumerate(env.agents):
            env.action_space[agent].seed((options["env_seed"] + index) * 1000 + i)
agent = REGISTRY_Agents[args.agent](args, envs, callback=Record())
started = time.perf_counter()
agent.train(args.running_steps // agent.n_envs)
train_seconds = time.perf_counter() - started
agent.finish()
envs.close()
if "--timing" in sys.argv:  # for bench/xuance_throughput.py
    print(json.dumps({"timesteps": int(agent.current_step), "train_seconds": train_seconds}))
print(json.dumps(episodes))
