"""Standard observation encodings (mosaic.workerkit.spaces): shapes, one-hot values, nesting, refusals."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from mosaic.workerkit.spaces import action_kind, encode, encoded_space, encoding_name, is_image_space, needs_encoding

S = gym.spaces

#: A nested space touching every encoding, and its encoded size.
NESTED = S.Dict({"pos": S.Box(-1.0, 1.0, (2, 3), np.float64),
                 "turn": S.Discrete(3, start=1),
                 "pair": S.Tuple((S.MultiDiscrete([2, 4]), S.MultiBinary(3)))})
NESTED_SIZE = 6 + 3 + (2 + 4) + 3


@pytest.mark.parametrize("space,size", [
    (S.Box(-1.0, 1.0, (5,), np.float32), 5),
    (S.Box(0.0, 30.0, (7, 7, 3), np.float32), 147),
    (S.Box(-1.0, 1.0, (27, 5), np.float64), 135),
    (S.Box(0.0, 1.0, (), np.float32), 1),
    (S.Discrete(4), 4),
    (S.MultiDiscrete([3, 2, 5]), 10),
    (S.MultiBinary([2, 2]), 4),
    (S.Tuple((S.Discrete(2), S.Box(0.0, 1.0, (3,)))), 5),
    (NESTED, NESTED_SIZE),
])
def test_every_sample_encodes_into_the_encoded_space(space, size):
    target = encoded_space(space)
    assert isinstance(target, S.Box) and target.shape == (size,)
    space.seed(0)
    for _ in range(20):
        value = encode(space, space.sample())
        assert value.shape == (size,) and value.dtype == np.float32
        assert target.contains(value), (space, value)


def test_a_flat_box_is_left_alone():
    box = S.Box(-1.0, 1.0, (5,), np.float32)
    assert not needs_encoding(box) and encoded_space(box) is box and encoding_name(box) == "none"
    assert all(needs_encoding(s) for s in (S.Discrete(2), S.Box(0, 1, (2, 2)), S.Tuple((box,))))


def test_discrete_is_one_hot_counted_from_start():
    space = S.Discrete(4, start=-1)
    for value in range(-1, 3):
        expected = np.zeros(4, np.float32)
        expected[value + 1] = 1.0
        np.testing.assert_array_equal(encode(space, value), expected)
    assert encoding_name(space) == "one-hot(4)"


def test_multi_discrete_is_one_one_hot_per_component():
    space = S.MultiDiscrete([3, 2])
    np.testing.assert_array_equal(encode(space, np.array([2, 0])), [0, 0, 1, 1, 0])
    np.testing.assert_array_equal(encode(space, np.array([0, 1])), [1, 0, 0, 0, 1])
    assert encoding_name(space) == "one-hot(3+2)"


def test_box_is_flattened_in_c_order_with_its_bounds():
    space = S.Box(np.array([[0.0, 1.0], [2.0, 3.0]]), np.array([[10.0, 11.0], [12.0, 13.0]]), dtype=np.float64)
    target = encoded_space(space)
    np.testing.assert_array_equal(target.low, [0, 1, 2, 3])
    np.testing.assert_array_equal(target.high, [10, 11, 12, 13])
    np.testing.assert_array_equal(encode(space, np.array([[5.0, 6.0], [7.0, 8.0]])), [5, 6, 7, 8])
    assert encoding_name(space) == "flatten(2x2)"


def test_tuple_and_dict_concatenate_their_parts_in_order():
    space = S.Tuple((S.Discrete(2), S.Dict({"b": S.Box(-5.0, 5.0, (1,)), "a": S.Discrete(3)})))
    value = (1, {"b": np.array([4.0], np.float32), "a": 0})
    # tuple order, then dict keys sorted: Discrete(2), a: Discrete(3), b: Box
    np.testing.assert_array_equal(encode(space, value), [0, 1, 1, 0, 0, 4])
    np.testing.assert_array_equal(encoded_space(space).low, [0, 0, 0, 0, 0, -5])
    assert encoding_name(space) == "concat[one-hot(2), concat{a: one-hot(3), b: none}]"


def test_nested_encoding_matches_the_parts_encoded_one_by_one():
    NESTED.seed(1)
    value = NESTED.sample()
    parts = [encode(NESTED["pair"], value["pair"]), encode(NESTED["pos"], value["pos"]),
             encode(NESTED["turn"], value["turn"])]
    np.testing.assert_array_equal(encode(NESTED, value), np.concatenate(parts))


@pytest.mark.parametrize("space", [S.Text(5), S.Graph(S.Box(0, 1, (2,)), None),
                                   S.Tuple((S.Discrete(2), S.Sequence(S.Discrete(2))))])
def test_a_space_without_a_standard_encoding_is_named_in_the_error(space):
    inner = space.spaces[1] if isinstance(space, S.Tuple) else space
    for call in (encoded_space, encoding_name, lambda s: encode(s, s.sample())):
        with pytest.raises(ValueError, match=type(inner).__name__) as err:
            call(space)
        assert "supported: Box, Discrete" in str(err.value)


@pytest.mark.parametrize("space, image", [
    (S.Box(0, 255, (457, 120, 3), np.uint8), True), (S.Box(0, 255, (8, 8, 1), np.uint8), True),
    (S.Box(0, 255, (8, 8, 4), np.uint8), True), (S.Box(0.0, 30.0, (7, 7, 3), np.float32), False),
    (S.Box(0, 255, (8, 8, 5), np.uint8), False), (S.Box(-1.0, 1.0, (27, 5)), False),
    (S.Box(0, 255, (64,), np.uint8), False), (S.Discrete(3), False)])
def test_images_are_hwc_uint8_boxes_with_1_3_or_4_channels(space, image):
    assert is_image_space(space) is image


def test_action_kinds_as_workers_name_them():
    assert action_kind(gym.spaces.Discrete(4)) == "discrete"
    assert action_kind(gym.spaces.Box(-1.0, 1.0, (2,))) == "box"
    assert action_kind(gym.spaces.MultiDiscrete([2, 3])) == "MultiDiscrete"
