import jax
import jax.numpy as jnp

from dpprep import sampling
from dpprep.tracing import everywhere


def _primitives(fn, *args):
    return {eqn.primitive.name for eqn in jax.make_jaxpr(fn)(*args).jaxpr.eqns}


def test_everywhere_is_the_predicate_itself_outside_vmap():
    assert bool(everywhere(jnp.array(True)))
    assert not bool(everywhere(jnp.array(False)))


def test_under_vmap_everywhere_is_all_of_the_mapped_predicates():
    assert jax.vmap(everywhere)(jnp.array([True, True])).tolist() == [True, True]
    assert jax.vmap(everywhere)(jnp.array([True, False])).tolist() == [False, False]


def test_a_cond_on_everywhere_stays_a_cond_under_vmap():
    def f(x):
        return jax.lax.cond(everywhere(jnp.all(x > 0)), lambda x: x, lambda x: -x, x)

    def bare(x):
        return jax.lax.cond(jnp.all(x > 0), lambda x: x, lambda x: -x, x)

    xs = jnp.array([[1.0, 2.0], [-1.0, 3.0]])
    assert "cond" in _primitives(jax.vmap(f), xs)
    assert "cond" not in _primitives(jax.vmap(bare), xs)  # what everywhere prevents
    # One batch has a non-positive entry, so every batch takes the second branch: still each its
    # own value.
    assert jax.vmap(f)(xs).tolist() == [[-1.0, -2.0], [1.0, -3.0]]


def test_the_gather_of_a_vmapped_padded_batch_zeroes_each_batchs_own_padding():
    data = jnp.arange(12.0).reshape(6, 2) + 1.0
    idx = jnp.array([[3, 0, 0], [1, 2, 0]])
    mask = jnp.array([[1.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
    rows = jax.vmap(sampling.gather, in_axes=(None, 0, 0))(data, idx, mask)
    assert rows.tolist() == [
        [[7.0, 8.0], [0.0, 0.0], [0.0, 0.0]],
        [[3.0, 4.0], [5.0, 6.0], [1.0, 2.0]],
    ]
    assert "cond" in _primitives(jax.vmap(sampling.gather, in_axes=(None, 0, 0)), data, idx, mask)
