from __future__ import annotations

import pytest

from mosaic.workerkit.envs import ENV_FAMILIES, available_env_ids, make_env
from mosaic.errors import ConfigError


def test_each_family_resolves_from_installed_packages():
    assert {"connect_four_v3", "tictactoe_v3", "chess_v6", "go_v5"} <= set(available_env_ids("classic"))
    assert {"simple_spread_v3", "simple_tag_v3", "simple_adversary_v3"} <= set(available_env_ids("mpe"))
    assert {"pistonball_v6", "cooperative_pong_v5"} <= set(available_env_ids("butterfly"))
    assert {"waterworld_v4", "multiwalker_v9", "pursuit_v4"} <= set(available_env_ids("sisl"))


def test_unknown_env_lists_what_exists():
    with pytest.raises(ConfigError) as info:
        make_env("classic", "connect_five_v3", "AEC")
    msg = str(info.value)
    assert msg.startswith("environment.env_id:") and "connect_four_v3" in msg and "did you mean" in msg


def test_unknown_family_and_api():
    with pytest.raises(ConfigError, match="environment.family: 'atari' is not one of"):
        make_env("atari", "pong_v3")
    with pytest.raises(ConfigError, match="environment.api_type: PARALLEL is not available"):
        make_env("classic", "tictactoe_v3", "PARALLEL")
    with pytest.raises(ConfigError, match="environment.env_kwargs"):
        make_env("mpe", "simple_spread_v3", "PARALLEL", {"no_such_kwarg": 1})


def test_parallel_env_steps():
    env = make_env("mpe", "simple_spread_v3", "PARALLEL", {"N": 2, "max_cycles": 5})
    obs, _ = env.reset(seed=1)
    assert len(obs) == 2
    env.step({a: env.action_space(a).sample() for a in env.agents})
    env.close()


@pytest.mark.parametrize("family", ENV_FAMILIES)
def test_every_installed_env_id_declares_how_it_rewards_its_agents(family):
    """Self-play validation relies on it: a new env id must be classified, not silently allowed."""
    from mosaic.workerkit.envs import REWARD_STRUCTURES, available_env_ids, reward_structure

    ids = available_env_ids(family)
    assert ids
    unclassified = [i for i in ids if reward_structure(family, i) not in ("cooperative", "competitive", "mixed",
                                                                          "single")]
    assert not unclassified, f"classify these {family} envs in mosaic.workerkit.envs.REWARD_STRUCTURES: {unclassified}"
    assert sorted(REWARD_STRUCTURES[family]) == ids, "REWARD_STRUCTURES lists ids the packages do not offer"
