"""Named optimizers: one object per configuration, equal to optax's own, bad names rejected."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import optax
import pytest

from dpprep import optimizers


def test_same_configuration_equal_optimizers():
    """Equal configurations give equal (and equally hashed) NamedOptimizers, so configs built the
    same way compare equal and share a compilation."""
    same = [
        (optimizers.optimizer("adam"), optimizers.optimizer("adam")),
        (
            optimizers.optimizer("adam"),
            optimizers.optimizer("adam", b1=0.9, b2=0.999),
        ),  # the defaults
        (optimizers.optimizer("sgd", momentum=0.9), optimizers.optimizer("sgd", momentum=0.9)),
    ]
    for a, b in same:
        assert isinstance(a, optimizers.NamedOptimizer) and a == b and hash(a) == hash(b)
    assert optimizers.optimizer("adam", b1=0.8) != optimizers.optimizer("adam")
    assert optimizers.optimizer("sgd") != optimizers.optimizer("adam")


@pytest.mark.parametrize(
    "name, options", [("adam", {}), ("sgd", {"momentum": 0.9}), ("adamw", {"weight_decay": 0.1})]
)
def test_updates_equal_optax_at_unit_rate(name, options):
    ours, ref = optimizers.optimizer(name, **options), getattr(optax, name)(1.0, **options)
    params = {"w": jnp.arange(3.0)}
    s1, s2 = ours.init(params), ref.init(params)
    for grad in (jnp.array([1.0, -2.0, 0.5]), jnp.array([0.3, 0.1, -1.0])):
        u1, s1 = ours.update({"w": grad}, s1, params)
        u2, s2 = ref.update({"w": grad}, s2, params)
        np.testing.assert_array_equal(np.asarray(u1["w"]), np.asarray(u2["w"]))


@pytest.mark.parametrize(
    "name, options, match",
    [
        ("nope", {}, "optax optimizer"),
        ("chain", {}, "optax optimizer"),
        ("adam", {"learning_rate": 0.1}, "unit-rate"),
        ("adam", {"momentum": 0.9}, "takes no option"),
        ("sgd", {"momentum": [0.9]}, "hashable"),
    ],
)
def test_bad_input(name, options, match):
    with pytest.raises(ValueError, match=match):
        optimizers.optimizer(name, **options)
