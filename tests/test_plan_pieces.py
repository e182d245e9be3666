"""The plan's pieces cannot be assembled around foreign ones: padding holds no record, a batch
and its mask travel as one object, the grad fn and the optimizer are the plan's own, the bare
privatizer refuses values it cannot check, and an extension vouching for a mechanism hook is named
in every guarantee reported."""

from __future__ import annotations

import dataclasses
import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from dpprep import clipping, models, noise, sweeps
from dpprep import extensions as ext_lib
from dpprep.algorithms import Hyper, TrainConfig, fit, train
from dpprep.corrdp.sgd import CoordinateNoise
from dpprep.extensions import Extension
from dpprep.features import AffineFeatures
from dpprep.optimizers import L2BallProjection
from dpprep.plan import DPPlan, PlanBatch, PlanGradFn, PrivateTransformation
from dpprep.selection import PrivateSelection, Repetitions, select
from dpprep.step import dp_step

N = 60
RNG = np.random.default_rng(0)
X = RNG.normal(size=(N, 3)).astype(np.float32)
Y = (X[:, 0] > 0).astype(np.float32)
YC = Y.astype(np.int32)
LOGISTIC = models.logistic_regression(3)
SOFTMAX = models.softmax_regression(3, 2)
KEY = jax.random.key(0)


def _plan(sampling="poisson", **kw) -> DPPlan:
    options = dict(batch_size=6, steps=6, l2_clip_norm=1.0, noise_multiplier=1.0, delta=1e-5)
    options.update(kw)
    return DPPlan.create(sampling, N, **options)


def _linear(params, batch):
    return jnp.mean((batch["x"] @ params["w"] - batch["y"]) ** 2)


def _data():
    return {"x": jnp.asarray(X), "y": jnp.asarray(Y)}


# ---------------------------------------------------------------------------------------------
# Padding holds no record; the batch and its mask are one object


@pytest.mark.parametrize("sampling,batch_size", [("poisson", 6), ("shuffle", 7)])
def test_padded_slots_hold_no_record(sampling, batch_size):
    """Poisson's unused slots and shuffle's last batch point at index 0: their rows are zeros,
    the same whatever the data (on main they were copies of record 0)."""
    extra = {"shuffle_bound": "no_amplification"} if sampling == "shuffle" else {}
    plan = _plan(sampling, batch_size=batch_size, steps=None, epochs=1, **extra)
    other = {"x": jnp.asarray(7 * X + 3), "y": jnp.asarray(1 - Y)}
    draw = jax.jit(lambda t, data: plan.batch(KEY, t, data))
    padded = 0
    for t in range(plan.steps):
        batch = draw(t, _data())
        assert isinstance(batch, PlanBatch)
        (rows, mask), (changed, _) = batch, draw(t, other)  # readable
        pad = np.asarray(mask) == 0
        padded += int(pad.sum())
        for leaf, leaf_changed in zip(
            jax.tree_util.tree_leaves(rows), jax.tree_util.tree_leaves(changed)
        ):
            np.testing.assert_array_equal(np.asarray(leaf)[pad], 0)
            np.testing.assert_array_equal(np.asarray(leaf)[pad], np.asarray(leaf_changed)[pad])
    assert padded > 0  # the test saw padding


def test_a_hand_made_mask_or_batch_is_refused():
    plan = _plan()
    grad_fn = plan.clipped_grad(_linear)
    params = {"w": jnp.zeros(3)}
    batch = plan.batch(KEY, 0, _data())
    rows, mask = batch
    with pytest.raises(TypeError, match="takes no mask"):
        grad_fn(params, batch, mask=jnp.ones(plan.pad))  # counts padding (26.7·C on main)
    with pytest.raises(TypeError, match="takes the plan's batches"):
        grad_fn(params, rows)
    with pytest.raises(TypeError, match="made by plan.batch"):
        PlanBatch(rows, jnp.ones(plan.pad))
    with pytest.raises(AttributeError, match="immutable"):
        batch.mask = jnp.ones(plan.pad)  # type: ignore[misc]
    # It crosses jit as one object.
    out = jax.jit(lambda b: grad_fn(params, b).grad)(batch)
    np.testing.assert_allclose(out["w"], grad_fn(params, batch).grad["w"], rtol=1e-6)


def _count_padding(batch):
    """``batch`` with its mask mapped to 1 everywhere (a careless map over the PlanBatch, whose
    last leaf is the mask): every padded slot counts."""
    leaves, treedef = jax.tree_util.tree_flatten(batch)
    return jax.tree_util.tree_unflatten(treedef, [*leaves[:-1], jnp.ones_like(leaves[-1])])


def _scaled_record_0(factor):
    """Records with per-example gradient −x (loss −w·x), each of norm 0.5; record 0 ×factor."""
    x = np.random.default_rng(1).normal(size=(N, 3))
    x = 0.5 * x / np.linalg.norm(x, axis=1, keepdims=True)
    x[0] *= factor
    return jnp.asarray(x, jnp.float32)


def test_a_record_at_index_0_moves_each_step_s_sum_by_at_most_c():
    """An own loop with dp_step: record 0 scaled ×100 or not, each step's clipped sum (before the
    noise, at the same parameters) moves by at most C — also when the batch is mapped over (its
    mask set to 1 everywhere, counting every padded slot): padded slots hold zeros, not record 0
    (on main, a mask counting them made record 0 contribute 26.7·C)."""
    plan = _plan(batch_size=20, steps=8)  # record 0 is drawn at steps 3 and 7
    clip = plan.l2_clip_norm
    grad_fn = plan.clipped_grad(lambda w, b: -jnp.sum(w * b))
    tx = plan.optimizer(optax.sgd(0.1), key=KEY)
    base, scaled = _scaled_record_0(1.0), _scaled_record_0(100.0)
    step = jax.jit(lambda p, s, data: dp_step(p, s, data, grad_fn=grad_fn, tx=tx))
    # The same step's batch, its mask mapped to 1 everywhere: every padded slot counted.
    counted = jax.jit(lambda p, t, data: grad_fn(p, _count_padding(plan.batch(KEY, t, data))))
    params, state = jnp.zeros(3), tx.init(jnp.zeros(3))
    moved, padded = [], 0
    for t in range(plan.steps):
        _, _, a = step(params, state, base)
        params, state, b = step(params, state, scaled)
        for one, other in ((a, b), (counted(params, t, base), counted(params, t, scaled))):
            diff = np.asarray(one.grad, np.float64) - np.asarray(other.grad, np.float64)
            moved.append(float(np.linalg.norm(diff)))
        padded += int(np.sum(np.asarray(plan.batch(KEY, t, base).mask) == 0))
    assert max(moved) <= clip * (1 + 1e-6)
    assert max(moved) > 0.4 * clip and padded > 0  # record 0 was drawn, and padding was there


def test_microbatch_padding_holds_no_record():
    """`clipped_grad(..., microbatch_size=m)` pads the batch to a multiple of m with zeros (it
    repeated the first example): what the padded slots hold, seen by the clipped function."""
    batch = {"x": jnp.full((5, 2), 9.0)}
    seen = []

    def clipped(part, weights):
        seen.append(part["x"])
        return jnp.sum(part["x"] * (1 - weights)[:, None]), jnp.zeros(3), None

    total, _, _ = clipping._microbatched(clipped, 3, 5, batch, jnp.ones(5), [], [])
    assert float(total) == 0.0  # the padded slot's row is zeros


def test_log_loss_on_padded_rows_stays_finite():
    """Zeros are a valid input of the losses dpprep ships: counted or not, padding stays finite."""
    plan = _plan()
    for model, y in ((LOGISTIC, Y), (SOFTMAX, YC)):
        grad_fn = plan.clipped_grad(model)
        out = grad_fn(model.init(jax.random.key(1)), _count_padding(plan.batch(KEY, 0, (X, y))))
        assert all(bool(jnp.all(jnp.isfinite(g))) for g in jax.tree_util.tree_leaves(out.grad))


# ---------------------------------------------------------------------------------------------
# Only the plan makes its pieces


def test_a_hand_built_grad_fn_or_optimizer_is_refused():
    plan = _plan()
    foreign = clipping.clipped_grad(_linear, l2_clip_norm=10.0)  # norms 8.6 against C = 1
    with pytest.raises(TypeError, match=re.escape("plan.clipped_grad(loss)")):
        PlanGradFn(plan, foreign)
    grad_fn = plan.clipped_grad(_linear)
    with pytest.raises(TypeError, match=re.escape("plan.clipped_grad(loss)")):
        dataclasses.replace(grad_fn, fn=foreign)
    with pytest.raises(TypeError, match=re.escape("plan.optimizer(tx, key=...)")):
        PrivateTransformation(plan, KEY, optax.sgd(0.1))
    tx = plan.optimizer(optax.sgd(0.1), key=KEY)
    with pytest.raises(TypeError, match=re.escape("plan.optimizer(tx, key=...)")):
        dataclasses.replace(tx, chained=optax.sgd(0.1))
    # The plan's own still work together.
    params = {"w": jnp.zeros(3)}
    dp_step(params, tx.init(params), _data(), grad_fn=grad_fn, tx=tx)


# ---------------------------------------------------------------------------------------------
# The bare privatizer takes concrete values only


@pytest.mark.parametrize("traced", ["noise_multiplier", "l2_clip_norm", "normalize_by", "scales"])
def test_gaussian_privatizer_refuses_traced_noise_values(traced):
    params = {"w": jnp.zeros(4)}
    values = dict(noise_multiplier=1.0, l2_clip_norm=1.0, normalize_by=1.0, scales=None)

    def build(value):
        given = {**values, traced: {"w": value} if traced == "scales" else value}
        tx = noise.gaussian_privatizer(key=KEY, **given)
        return tx.update(params, tx.init(params), params)[0]["w"]

    with pytest.raises(TypeError, match=f"traced {traced}.*concrete numbers.*plan"):
        jax.jit(build)(jnp.float32(0.0))  # a 0 would add no noise
    with pytest.raises(TypeError, match=f"traced {traced}"):
        jax.vmap(build)(jnp.ones(2, jnp.float32))
    # Built outside jit from concrete values, it runs inside jit (and a 0 is refused on the host).
    tx = noise.gaussian_privatizer(key=KEY, l2_clip_norm=1.0, noise_multiplier=1.0)
    out = jax.jit(lambda s: tx.update(params, s, params)[0])(tx.init(params))
    assert float(jnp.std(out["w"])) > 0
    with pytest.raises(ValueError):
        build(0.0)


def test_sweeps_over_the_noise_use_the_internal_privatizer():
    """The sweeps vary z and C inside one compiled call (noise.privatizer, internal): each point
    is checked and accounted on the host, and it runs."""
    plan = _plan()
    z = plan.noise_multiplier
    out = sweeps.sweep(
        TrainConfig(LOGISTIC, Hyper(0.5), plan),
        LOGISTIC.init(None),
        (X, Y),
        jax.random.split(KEY, 2),
        noise_multiplier=[z, 2 * z],
        l2_clip_norm=[1.0, 0.5],
    )
    assert out.epsilon.shape == (2, 2) and out.epsilon[1, 0] < out.epsilon[0, 0]
    assert "Internal" in (noise.privatizer.__doc__ or "")


# ---------------------------------------------------------------------------------------------
# Escape hatches that say so


@dataclasses.dataclass(frozen=True)
class NoNoise(Extension):
    """A user's privatizer that adds no noise, vouched for: the guarantee rests on its word."""

    vouches = ("privatizer",)

    def privatizer(self, values, **options):
        del values
        return optax.scale(1.0 / options["normalize_by"])


RELIANCE = "rests on an unverified extension: NoNoise vouches for privatizer"


@pytest.mark.slow  # over 8 s on the reference machine (2 cores, 2 test workers)
def test_a_vouching_extension_is_named_in_every_reported_guarantee():
    plan = _plan()
    config = TrainConfig(LOGISTIC, Hyper(0.5), plan, extensions=(NoNoise(),))
    _, metrics = train(config, LOGISTIC.init(None), (X, Y), KEY)
    assert RELIANCE in metrics["guarantee"] and plan.describe() in metrics["guarantee"]
    out = fit(
        LOGISTIC,
        LOGISTIC.init(None),
        (X, Y),
        KEY,
        target_epsilon=4.0,
        delta=1e-5,
        l2_clip_norm=1.0,
        learning_rate=0.5,
        batch_size=6,
        steps=4,
        extensions=(NoNoise(),),
    )
    assert RELIANCE in out.guarantee and RELIANCE in out.metrics["guarantee"]
    keys = jax.random.split(KEY, 2)
    swept = sweeps.sweep_points(config, LOGISTIC.init(None), (X, Y), keys, {"learning_rate": [0.1]})
    assert swept.guarantee is not None and RELIANCE in swept.guarantee
    grid = sweeps.sweep(config, LOGISTIC.init(None), (X, Y), keys, learning_rate=[0.1, 0.2])
    assert grid.guarantee is not None and RELIANCE in grid.guarantee
    selection = PrivateSelection(Repetitions(2.0), score_noise=5.0, validation_size=20)
    splan = selection.plan("full", N, steps=3, l2_clip_norm=1.0, delta=1e-5, target_epsilon=8.0)
    chosen = select(
        TrainConfig(SOFTMAX, Hyper(0.5), splan, extensions=(NoNoise(),)),
        SOFTMAX.init(None),
        (X, YC),
        KEY,
        {"learning_rate": [0.1, 0.3]},
    )
    assert RELIANCE in chosen.accounting.describe()
    assert chosen.accounting.rests_on == (RELIANCE,)
    assert chosen.accounting.as_row()["rests_on"] == RELIANCE


def test_dpprep_s_own_extensions_are_verified_and_a_subclass_is_not():
    plan = _plan()
    for ext in (AffineFeatures(), L2BallProjection(5.0), CoordinateNoise()):
        assert ext_lib.vouched_hooks(ext) and ext_lib.verified(ext)
    config = TrainConfig(
        LOGISTIC, Hyper(0.5), plan, extensions=(AffineFeatures(), L2BallProjection(5.0))
    )
    _, metrics = train(config, LOGISTIC.init(None), (X, Y), KEY)
    assert metrics["guarantee"] == plan.describe()

    @dataclasses.dataclass(frozen=True)
    class MyProjection(L2BallProjection):
        verified_by_dpprep = True  # not dpprep's: the mark does not count

    assert not ext_lib.verified(MyProjection(5.0))
    config = TrainConfig(LOGISTIC, Hyper(0.5), plan, extensions=(MyProjection(5.0),))
    _, metrics = train(config, LOGISTIC.init(None), (X, Y), KEY)
    assert "rests on an unverified extension: MyProjection vouches for wrap" in metrics["guarantee"]
    # A non-private plan claims nothing, so nothing rests on the extension.
    quiet = TrainConfig(
        LOGISTIC,
        Hyper(0.5),
        DPPlan.non_private("poisson", N, batch_size=6, steps=3),
        extensions=(NoNoise(),),
    )
    assert "unverified" not in train(quiet, LOGISTIC.init(None), (X, Y), KEY)[1]["guarantee"]


@pytest.mark.parametrize("hook", ["clipped_grad", "privatizer", "wrap"])
def test_the_refusal_of_an_unvouched_hook_says_what_it_must_keep_not_to_vouch(hook):
    def override(self, *args, **kwargs):
        return None if hook != "wrap" else args[0]

    Unvouched = dataclasses.dataclass(frozen=True)(
        type("Unvouched", (Extension,), {hook: override})
    )
    config = TrainConfig(LOGISTIC, Hyper(0.5), _plan(), extensions=(Unvouched(),))
    with pytest.raises(ValueError) as err:
        train(config, LOGISTIC.init(None), (X, Y), KEY)
    message = str(err.value)
    assert ext_lib.HOOK_REQUIREMENTS[hook] in message
    assert "author's word" in message and "every report says so" in message
    # No advice to vouch: no "add/set/declare ... vouches", no "vouches = (...)".
    advice = r"\b(add|set|declare|put|list|use)\b[^.;]{0,40}\bvouch|vouches\s*=\s*\("
    assert not re.search(advice, message, re.IGNORECASE), message


# ---------------------------------------------------------------------------------------------
# What the verified extensions' tests check (their vouched hooks)


def test_coordinate_noise_adds_at_least_the_plan_s_noise_times_its_factor():
    ext = CoordinateNoise()
    scales = {"w": jnp.asarray([[2.0], [1.0], [3.0]]), "b": jnp.asarray([1.5])}
    values = {"noise_scales": scales, "stddev": 0.0}
    z, clip, count = 1.3, 0.7, 20_000
    tx = ext.privatizer(values, key=KEY, l2_clip_norm=clip, noise_multiplier=z, normalize_by=1.0)
    params = {"w": jnp.zeros((3, count)), "b": jnp.zeros((count,))}
    scaled = {"w": jnp.broadcast_to(scales["w"], (3, count)), "b": jnp.full((count,), 1.5)}
    noisy, _ = tx.update(params, tx.init(params), params)
    floor = z * clip * ext.noise_factor(values)
    for leaf, scale in zip(jax.tree_util.tree_leaves(noisy), jax.tree_util.tree_leaves(scaled)):
        ratio = np.std(np.asarray(leaf) / np.asarray(scale), axis=-1) / (z * clip)
        np.testing.assert_allclose(ratio, 1.0, atol=0.03)  # std z·C·scale per coordinate
        assert np.all(np.std(np.asarray(leaf), axis=-1) >= 0.97 * floor)


def test_l2_ball_projection_calls_the_inner_update_once_and_projects():
    calls = []

    def update(updates, state, params=None):
        calls.append(1)
        return updates, state

    inner = optax.GradientTransformation(optax.init_empty_state, update)
    tx = L2BallProjection(1.0).wrap(inner, {})
    params = {"w": jnp.zeros(2)}
    out, _ = tx.update({"w": jnp.asarray([3.0, 4.0])}, tx.init(params), params)
    assert len(calls) == 1
    assert math.isclose(float(jnp.linalg.norm(out["w"])), 1.0, rel_tol=1e-6)
