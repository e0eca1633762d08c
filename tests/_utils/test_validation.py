"""Tests of viboost._utils.validation: the shared argument checks and the one random-seed
convention."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import sklearn.utils

from viboost._utils.validation import (
    check_int,
    check_positive,
    check_probability,
    check_random_state,
    check_real,
    describe_non_numeric_columns,
    non_numeric_columns,
    spawn_generator,
)


# ---------------------------------------------------------------------- random seeds
def test_int_seed_is_scikit_learns_random_state():
    for seed in (0, 7, 2**32 - 1, np.int64(12)):
        ours = check_random_state(seed)
        assert isinstance(ours, np.random.RandomState)
        np.testing.assert_array_equal(
            ours.random_sample(5), sklearn.utils.check_random_state(seed).random_sample(5)
        )


def test_generators_and_random_states_pass_unchanged():
    gen = np.random.default_rng(1)
    state = np.random.RandomState(1)
    assert check_random_state(gen) is gen
    assert check_random_state(state) is state
    assert isinstance(check_random_state(None), np.random.RandomState)  # numpy's global one


@pytest.mark.parametrize("bad", ["seed", 1.5, -3, 2**32, True, False, [1, 2]])
def test_bad_random_state(bad):
    with pytest.raises(ValueError, match="random_state must be"):
        check_random_state(bad)


def test_spawn_generator_draws_one_seed():
    # From a RandomState: the seed the Gibbs sampler has always drawn per chain.
    state = np.random.RandomState(3)
    want = np.random.default_rng(np.random.RandomState(3).randint(0, 2**31 - 1)).random(4)
    np.testing.assert_array_equal(spawn_generator(state).random(4), want)
    assert state.randint(10**6) == _after_one_draw(np.random.RandomState(3)).randint(10**6)
    # From a Generator: one integers() draw; an int is the Generator's own seed.
    want = np.random.default_rng(np.random.default_rng(4).integers(0, 2**31 - 1)).random(4)
    np.testing.assert_array_equal(spawn_generator(np.random.default_rng(4)).random(4), want)
    np.testing.assert_array_equal(spawn_generator(5).random(4), np.random.default_rng(5).random(4))
    with pytest.raises(ValueError, match="random_state must be"):
        spawn_generator(-1)
    assert isinstance(spawn_generator(None), np.random.Generator)


def _after_one_draw(state: np.random.RandomState) -> np.random.RandomState:
    state.randint(0, 2**31 - 1)
    return state


# ---------------------------------------------------------------------- scalar checks
def test_scalar_checks():
    assert check_positive(2, "x") == 2.0 and check_probability(1, "p") == 1.0
    assert check_int(np.int64(3), "n", 1) == 3 and check_real(-np.inf, "r") == -np.inf
    for call in (
        lambda: check_positive(0.0, "x"),
        lambda: check_positive(np.inf, "x"),
        lambda: check_positive(True, "x"),
        lambda: check_probability(1.5, "p"),
        lambda: check_int(0, "n", 1),
        lambda: check_int(2.0, "n", 1),
        lambda: check_real(np.nan, "r"),
    ):
        with pytest.raises(ValueError, match="must be"):
            call()


# ---------------------------------------------------------------------- non-numeric columns
def test_non_numeric_columns_named_and_described():
    frame = pd.DataFrame(
        {"x": [1.0, 2.0, 3.0], "flag": [True, False, True], "colour": ["1", None, "red"]}
    )
    frame["digits"] = pd.Series(["1", "2", "3"], dtype=object)
    assert non_numeric_columns(frame) == ["colour", "digits"]
    assert describe_non_numeric_columns(frame) == [
        "'colour' (e.g. 'red' in data row 3)",
        "'digits'",
    ]
    assert non_numeric_columns(np.ones((2, 2))) == []
    assert describe_non_numeric_columns(np.ones((2, 2))) == []
