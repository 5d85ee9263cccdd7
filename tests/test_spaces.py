"""Standard observation encodings (mosaic.spaces): shapes, one-hot values, nesting, refusals."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from mosaic.spaces import encode, encoded_space, encoding_name, needs_encoding

S = gym.spaces

SPACES = {
    "discrete": S.Discrete(4),
    "discrete_start": S.Discrete(3, start=-1),
    "multi_discrete": S.MultiDiscrete([2, 3, 4]),
    "multi_binary": S.MultiBinary([2, 3]),
    "box_2d": S.Box(-1.0, 1.0, (27, 5), np.float32),
    "box_scalar": S.Box(0.0, 2.0, (), np.float32),
    "tuple": S.Tuple((S.Discrete(3), S.Box(-2.0, 2.0, (2, 2), np.float32))),
    "dict": S.Dict({"b": S.MultiDiscrete([2, 2]), "a": S.Tuple((S.Discrete(2), S.Box(0.0, 1.0, (3,))))}),
}


@pytest.mark.parametrize("name", sorted(SPACES))
def test_every_sample_encodes_into_the_encoded_space(name):
    space = SPACES[name]
    space.seed(0)
    target = encoded_space(space)
    assert needs_encoding(space)
    assert isinstance(target, S.Box) and len(target.shape) == 1 and target.dtype == np.float32
    for _ in range(20):
        vec = encode(space, space.sample())
        assert vec.shape == target.shape and vec.dtype == np.float32
        assert target.contains(vec), (name, vec)


def test_one_hot_marks_exactly_the_chosen_value():
    space = S.Discrete(4)
    for v in range(4):
        vec = encode(space, v)
        assert vec.tolist() == [1.0 if i == v else 0.0 for i in range(4)]
    assert encode(S.Discrete(3, start=-1), -1).tolist() == [1.0, 0.0, 0.0]


def test_multi_discrete_is_one_one_hot_per_component():
    vec = encode(S.MultiDiscrete([2, 3, 4]), np.array([1, 0, 3]))
    assert vec.tolist() == [0, 1, 1, 0, 0, 0, 0, 0, 1]
    assert encoding_name(S.MultiDiscrete([2, 3, 4])) == "one-hot(2+3+4)"


def test_box_is_flattened_in_c_order_with_its_bounds():
    space = S.Box(np.arange(6, dtype=np.float32).reshape(2, 3), 10.0, (2, 3), np.float32)
    value = np.arange(6, dtype=np.float32).reshape(2, 3) + 1
    assert encode(space, value).tolist() == [1, 2, 3, 4, 5, 6]
    assert encoded_space(space).low.tolist() == [0, 1, 2, 3, 4, 5]
    assert encoding_name(space) == "flatten(2x3)"


def test_flat_box_needs_no_encoding_and_is_kept():
    space = S.Box(-1.0, 1.0, (5,), np.float32)
    assert not needs_encoding(space)
    assert encoded_space(space) is space
    assert encoding_name(space) == "none"


def test_tuple_and_dict_concatenate_their_parts_dict_by_sorted_key():
    space = SPACES["dict"]
    value = {"b": np.array([1, 0]), "a": (1, np.array([0.5, 0.25, 0.0], np.float32))}
    # "a" first: one-hot(2) of 1, then the Box; then "b": one-hot(2+2) of [1, 0]
    assert encode(space, value).tolist() == [0, 1, 0.5, 0.25, 0.0, 0, 1, 1, 0]
    assert encoding_name(space) == "concat{a: concat[one-hot(2), none], b: one-hot(2+2)}"
    tup = SPACES["tuple"]
    assert encode(tup, (2, np.ones((2, 2), np.float32))).tolist() == [0, 0, 1, 1, 1, 1, 1]
    assert encoded_space(tup).shape == (7,)


@pytest.mark.parametrize("space", [S.Text(5), S.Graph(S.Box(0.0, 1.0, (2,)), None),
                                   S.Tuple((S.Discrete(2), S.Text(3)))])
def test_a_space_without_an_encoding_is_named_in_a_clear_error(space):
    with pytest.raises(ValueError, match=r"no standard encoding for observation space .*Text|Graph"):
        encoded_space(space)
    with pytest.raises(ValueError, match="supported: Box, Discrete"):
        encoding_name(space)
