"""Non-finite safety: a per-example gradient that is not finite contributes exactly zero.

One record with a NaN or inf feature or label, or a finite record on which the loss is NaN (a log
of a negative number, an overflowing logit), used to make the released parameters NaN — its
membership showed whatever the clip bound. Each clipped-sum path now leaves such an example out
(:func:`dpprep.clipping.nan_safe`): the unit tests check the sum equals the clipped sum of the
other examples on every path; the statistical tests check that the *release* of a small private
run is distributed the same with the record as with a record whose gradient is exactly zero,
under each sampler, through ``make_train_fn``, ``train`` and an own loop with ``dp_step``, under
``jit``.
"""

from __future__ import annotations

import functools
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from scipy import stats

from dpprep import clipping, features, models, sweeps
from dpprep.algorithms import Hyper, TrainConfig, make_train_fn, train
from dpprep.models import Model
from dpprep.plan import DPPlan
from dpprep.step import dp_step

D = 3
C = 0.5


def _leaves_close(got, want, rtol=1e-6, atol=1e-7):
    for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want), strict=True):
        assert bool(jnp.all(jnp.isfinite(a))), a
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol)


# ------------------------------------------------------------------------------------------------
# Unit: every clipped-sum path, one batch with each kind of non-finite example

# Rows 1..4 are bad: a NaN feature, an inf feature, a NaN label, and (row 4) a finite record on
# which the loss is NaN; every other row is a plain example. ``_clean`` puts a finite record in
# each bad slot, and the reference masks those slots out: the sum of the other examples.
BAD = np.array([1, 2, 3, 4])
SIZE = 9


def _log_batch():
    """For a loss on log(x): row 4 has a negative feature (log of it is NaN)."""
    rng = np.random.default_rng(0)
    x = rng.uniform(0.5, 2.0, size=(SIZE, D)).astype(np.float32)
    y = rng.normal(size=SIZE).astype(np.float32)
    x[1, 0], x[2, 1], y[3], x[4, 2] = np.nan, np.inf, np.nan, -1.0
    return x, y


def _glm_batch(classes: int):
    """For a GLM at ``_glm_params``: a NaN feature (row 1), an inf feature (row 2) and, for
    logistic regression, a NaN label (row 3; a class label is cast to int, so a NaN one is a
    wrong class, not a NaN); for softmax regression, row 4's features are finite but its logits
    overflow to inf, and the softmax of them is NaN (inf − inf). Returns ``x, y, bad rows``."""
    rng = np.random.default_rng(1)
    x = rng.normal(size=(SIZE, D)).astype(np.float32)
    y = rng.integers(0, classes, SIZE)
    x[1, 0], x[2, 1] = np.nan, np.inf
    if classes == 2:
        y = y.astype(np.float32)
        y[3] = np.nan
        return x, y, np.array([1, 2, 3])
    x[4] = [1e38, 1e38, 0.0]
    return x, y.astype(np.int32), np.array([1, 2, 4])


def _glm_params(classes: int):
    k = 1 if classes == 2 else classes
    w = np.zeros((D, k), np.float32)
    w[0], w[1] = 4.0, 3.0  # softmax's row 4 (norm 1.4e38): logits 7e38 overflow to inf
    w[2] = np.linspace(-0.5, 0.5, k)
    return {"w": jnp.asarray(w), "b": jnp.linspace(-0.1, 0.1, k)}


def _log_target_glm() -> Model:
    """A GLM fitting ``log y`` (gradient ``x ⊗ 2(z − log y)``: the fast path applies): its loss is
    NaN on a finite record with a negative target."""
    base = models.linear_regression(D)

    def per_example_loss(params, x, y):
        return (base.apply(params, x) - jnp.log(y)) ** 2

    def residual(params, x, y):
        return (2.0 * (base.apply(params, x) - jnp.log(y)))[:, None]

    return Model("log_target", base.init, base.apply, per_example_loss, residual, task="regression")


def _clean(x, y, bad=BAD):
    x, y = np.array(x), np.array(y)
    x[bad], y[bad] = 1.0, 1.0
    return x, y


def _log_loss(params, batch):
    x, y = batch
    return jnp.sum((jnp.log(x) @ params["w"] - y) ** 2)


def _mask_without(bad, base=None):
    mask = np.ones(SIZE, np.float32) if base is None else np.array(base, np.float32)
    mask[bad] = 0.0
    return jnp.asarray(mask)


def _check(grad_fn, params, x, y, *args, mask=None, bad=BAD, eager=True, **kw):
    """``grad_fn`` on the batch with bad rows equals it on a clean batch with those rows masked
    out, under jit (and eagerly), and counts the masked-in bad rows."""
    base = np.ones(SIZE, np.float32) if mask is None else np.asarray(mask)
    jitted = jax.jit(grad_fn)
    ref = jitted(params, _clean(x, y, bad), *args, mask=_mask_without(bad, base), **kw)
    for call in (jitted, grad_fn) if eager else (jitted,):
        got = call(params, (jnp.asarray(x), jnp.asarray(y)), *args, mask=jnp.asarray(base), **kw)
        _leaves_close(got.grad, ref.grad)
        assert int(got.nonfinite) == int(np.sum(base[bad] > 0))
        assert not bool(jnp.any(jnp.isfinite(got.norms[bad[base[bad] > 0]])))


@pytest.mark.parametrize("microbatch_size", [None, 4])
def test_vmap_path_leaves_out_nan_inf_features_labels_and_nan_losses(microbatch_size):
    params = {"w": jnp.asarray([0.3, -0.2, 0.5])}
    grad_fn = clipping.clipped_grad(_log_loss, l2_clip_norm=C, microbatch_size=microbatch_size)
    x, y = _log_batch()
    _check(grad_fn, params, x, y)
    # A masked-out bad slot (Poisson padding holding a NaN record's data) counts 0 and adds 0.
    mask = np.ones(SIZE, np.float32)
    mask[[2, 4, 8]] = 0.0
    _check(grad_fn, params, x, y, mask=jnp.asarray(mask), eager=False)


@pytest.mark.parametrize("classes", [2, 4])
@pytest.mark.parametrize("method", ["fast", "vmap"])
def test_glm_paths_leave_out_non_finite_rows(classes, method):
    """The fast path's x.T @ weighted would carry 0 · NaN from a non-finite x_i into every
    coordinate; the row is zeroed."""
    model = models.logistic_regression(D) if classes == 2 else models.softmax_regression(D, classes)
    x, y, bad = _glm_batch(classes)
    grad_fn = clipping.clipped_grad(model, l2_clip_norm=C, method=method)
    _check(grad_fn, _glm_params(classes), x, y, bad=bad)
    mask = np.ones(SIZE, np.float32)
    mask[[1, 5]] = 0.0
    _check(grad_fn, _glm_params(classes), x, y, mask=jnp.asarray(mask), bad=bad, eager=False)


@pytest.mark.parametrize("method", ["fast", "vmap"])
def test_glm_with_a_nan_loss_on_a_finite_record(method):
    """Finite x_i, NaN residual (log of a negative target), next to NaN and inf features."""
    rng = np.random.default_rng(5)
    x = rng.normal(size=(SIZE, D)).astype(np.float32)
    y = rng.uniform(0.5, 2.0, SIZE).astype(np.float32)
    x[1, 0], x[2, 1], y[3], y[4] = np.nan, np.inf, np.nan, -1.0
    params = {"w": jnp.asarray([[0.3], [-0.2], [0.5]]), "b": jnp.asarray([0.1])}
    grad_fn = clipping.clipped_grad(_log_target_glm(), l2_clip_norm=C, method=method)
    _check(grad_fn, params, x, y)


def test_fast_and_vmap_paths_agree_with_non_finite_rows():
    x, y, bad = _glm_batch(4)
    batch = (jnp.asarray(x), jnp.asarray(y))
    model = models.softmax_regression(D, 4)
    fast, slow = (
        jax.jit(clipping.clipped_grad(model, l2_clip_norm=C, method=m))(_glm_params(4), batch)
        for m in ("fast", "vmap")
    )
    _leaves_close(fast.grad, slow.grad, rtol=1e-5)
    assert int(fast.nonfinite) == int(slow.nonfinite) == len(bad)


def _dropout_model() -> Model:
    base = models.linear_regression(D)

    def per_example_loss(params, x, y, key=None):
        if key is not None:
            keep = jax.random.bernoulli(key, 0.7, x.shape)
            x = jnp.where(keep, x / 0.7, 0.0)
        return (x @ params["w"][:, 0] + params["b"][0] - y) ** 2

    return Model(
        "dropout_linear",
        base.init,
        lambda params, x, key=None: base.apply(params, x),
        per_example_loss,
        task="regression",
        target="real",
        stochastic=True,
    )


@pytest.mark.parametrize("microbatch_size", [None, 4])
def test_stochastic_model_with_per_example_keys(microbatch_size):
    """Each example gets its key by its slot, so the clean batch draws the same dropout masks.
    The bad rows are NaN in every feature or in the label (dropout cannot zero them away)."""
    model = _dropout_model()
    rng = np.random.default_rng(2)
    x = rng.normal(size=(SIZE, D)).astype(np.float32)
    y = rng.normal(size=SIZE).astype(np.float32)
    x[1], x[2], y[3], y[4] = np.nan, np.inf, np.nan, -np.inf
    params = {"w": jnp.asarray([[0.3], [-0.2], [0.5]]), "b": jnp.asarray([0.1])}
    grad_fn = clipping.clipped_grad(model, l2_clip_norm=C, microbatch_size=microbatch_size)
    _check(grad_fn, params, x, y, key=jax.random.key(3))


@pytest.mark.parametrize("shift", [None, np.array([0.5, -0.5, 1.0], np.float32)])
def test_affine_features_fast_path(shift):
    """The extension's own fast path (rank-1 corrections on the raw batch) leaves them out too."""
    ext = features.AffineFeatures()
    model = models.logistic_regression(D)
    values = {"feature_scale": 0.5, "feature_shift": shift}
    grad_fn = ext.clipped_grad(model, values, l2_clip_norm=jnp.float32(C), method="auto")
    x, y, bad = _glm_batch(2)
    _check(grad_fn, _glm_params(2), x, y, bad=bad)


def _conds(jaxpr) -> list:
    """Every cond equation of ``jaxpr`` and of the jaxprs nested in it."""
    found = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "cond":
            found.append(eqn)
        for param in eqn.params.values():
            for sub in param if isinstance(param, (tuple, list)) else (param,):
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns"):
                    found += _conds(inner)
    return found


@pytest.mark.parametrize("method", ["fast", "vmap"])
def test_vmapped_over_batches_the_guard_stays_a_cond_and_batches_stay_independent(method):
    """A sweep vmaps over seeds, each with its own batch. The guard's predicate is then "every
    batch finite" (unbatched), so it stays a cond instead of a select running the zeroing branch
    for every seed; each seed still takes its own sum: a clean seed's is bitwise the same whether
    or not another seed's batch has a bad row."""
    x, y, bad = _glm_batch(4)
    clean_x, clean_y = _clean(x, y, bad)
    model = models.softmax_regression(D, 4)
    grad_fn = clipping.clipped_grad(model, l2_clip_norm=C, method=method)
    run = jax.jit(jax.vmap(lambda x, y, m: grad_fn(_glm_params(4), (x, y), mask=m)))
    masks = jnp.stack([jnp.ones(SIZE), _mask_without(bad)])
    mixed = run(jnp.stack([jnp.asarray(x), clean_x]), jnp.stack([jnp.asarray(y), clean_y]), masks)
    clean = run(jnp.stack([clean_x, clean_x]), jnp.stack([clean_y, clean_y]), masks)
    for a, b in zip(*(jax.tree_util.tree_leaves(o.grad) for o in (mixed, clean))):
        np.testing.assert_allclose(np.asarray(a[0]), np.asarray(a[1]), rtol=1e-6, atol=1e-7)
        np.testing.assert_array_equal(np.asarray(a[1]), np.asarray(b[1]))
    np.testing.assert_array_equal(np.asarray(mixed.nonfinite), [len(bad), 0])
    jaxpr = jax.make_jaxpr(jax.vmap(lambda x, y: grad_fn(_glm_params(4), (x, y)).grad))(
        jnp.stack([clean_x, clean_x]), jnp.stack([clean_y, clean_y])
    )
    assert [eqn.invars[0].aval.shape for eqn in _conds(jaxpr.jaxpr)] == [()]


def test_each_contribution_stays_within_c_and_finite_rows_are_unchanged():
    """With no bad rows the sum is bitwise what it was per example (no cond branch taken); a bad
    row's one-hot contribution is exactly zero."""
    params = {"w": jnp.asarray([0.3, -0.2, 0.5])}
    grad_fn = jax.jit(clipping.clipped_grad(_log_loss, l2_clip_norm=C))
    x, y = _log_batch()
    for i in range(SIZE):
        one_hot = jnp.asarray(np.eye(SIZE, dtype=np.float32)[i])
        out = grad_fn(params, (jnp.asarray(x), jnp.asarray(y)), mask=one_hot)
        norm = float(jnp.linalg.norm(out.grad["w"]))
        assert (norm == 0.0) if i in BAD else (0.0 < norm <= C)


def test_clipped_grad_default_diagnostic_fields():
    out = clipping.ClippedGrad({"w": jnp.zeros(2)}, jnp.zeros(3))
    assert out.aux is None and out.nonfinite is None
    unclipped = clipping.clipped_grad(
        models.logistic_regression(D), l2_clip_norm=np.inf, method="none"
    )
    x, y = _clean(*_glm_batch(2))
    assert unclipped(_glm_params(2), (jnp.asarray(x), jnp.asarray(y))).nonfinite is None


# ------------------------------------------------------------------------------------------------
# Statistical: the release with the record is distributed as without it, under each sampler

N, STEPS, RUNS = 8, 4, 200
SLOT = 1  # fixed_order visits record t at step t: the record is in the run
SAMPLERS = ("poisson", "shuffle", "full", "fixed_order")
# Per test, at most 2 records × D coordinates, each KS test at level 1e-3: a false alarm (the two
# samples have the same distribution by construction) has probability below 0.6 % per test; the
# keys are fixed, so the test is deterministic.
KS_LEVEL = 1e-3


def _plan(sampler: str) -> DPPlan:
    kw = {"batch_size": 2} if sampler in ("poisson", "shuffle") else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # shuffle's "accounted as if Poisson" note
        return DPPlan.create(
            sampler, N, steps=STEPS, l2_clip_norm=C, noise_multiplier=1.0, delta=1e-3, **kw
        )


def _data(bad_row, bad_label=None, slot=SLOT):
    """The training set with record ``slot`` set to ``bad_row`` (the NaN record) or to the null
    record: features 0 (a GLM without intercept: gradient exactly 0) — the same n, so every
    sampler's layout and draws are the same. (Record 0 is also the data of every padded slot of
    a Poisson batch, masked out.)"""
    rng = np.random.default_rng(4)
    x = rng.uniform(0.5, 1.5, size=(N, D)).astype(np.float32)
    y = rng.uniform(0.0, 1.0, size=N).astype(np.float32)
    null_x, null_y, bad_x, bad_y = x.copy(), y.copy(), x.copy(), y.copy()
    null_x[slot], null_y[slot] = 0.0, 0.0
    bad_x[slot] = bad_row
    if bad_label is not None:
        bad_y[slot] = bad_label
    return (bad_x, bad_y), (null_x, null_y)


def _same_release(with_record, without_record):
    """No NaN; the same keys give the same release (the record adds exactly nothing); and
    independent keys give samples a KS test does not separate."""
    (a, a_same), (b, _) = with_record, without_record
    assert np.all(np.isfinite(a)), "a NaN record made the release NaN"
    np.testing.assert_allclose(a, a_same, rtol=1e-6, atol=1e-7)
    for j in range(a.shape[1]):
        assert stats.ks_2samp(a[:, j], b[:, j]).pvalue > KS_LEVEL, j


def _releases(run, bad, null):
    keys_a = jax.random.split(jax.random.key(1), RUNS)
    keys_b = jax.random.split(jax.random.key(2), RUNS)
    return (
        (np.asarray(run(*bad, keys_a)), np.asarray(run(*null, keys_a))),
        (np.asarray(run(*null, keys_b)), None),
    )


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_release_of_make_train_fn_is_the_same_with_a_nan_record(sampler):
    """make_train_fn checks no data values: a NaN feature reaches the GLM fast path, jitted and
    vmapped over keys."""
    model = models.logistic_regression(D, fit_intercept=False)
    fn = make_train_fn(TrainConfig(model, Hyper(0.5), _plan(sampler)), model.init(None))
    run = jax.jit(
        jax.vmap(lambda x, y, k: fn(model.init(None), x, y, k)[0]["w"][:, 0], (None, None, 0))
    )
    for slot in (0, SLOT):
        bad, null = _data(np.array([np.nan, 1.0, np.inf], np.float32), slot=slot)
        _same_release(*_releases(run, bad, null))


def _own_loop_loss(params, batch):
    # Finite data, NaN loss: the log of a negative feature.
    return jnp.sum((jnp.log(batch["x"]) @ params["w"] - batch["y"]) ** 2)


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_release_of_an_own_dp_step_loop_is_the_same_with_a_nan_loss_record(sampler):
    """An own loop with dp_step under jit (and vmap over the run key): the NaN arises inside the
    loss, from a finite record (a negative feature under a log). The null record has features 1
    (log 1 = 0: gradient exactly 0)."""
    plan = _plan(sampler)

    def one_run(x, y, key):
        tx = plan.optimizer(optax.sgd(0.5), key=key)
        grad_fn = plan.clipped_grad(_own_loop_loss)
        params = {"w": jnp.zeros(D)}

        def step(_, carry):
            params, state = carry
            return dp_step(params, state, {"x": x, "y": y}, grad_fn=grad_fn, tx=tx)[:2]

        return jax.lax.fori_loop(0, plan.steps, step, (params, tx.init(params)))[0]["w"]

    run = jax.jit(jax.vmap(one_run, (None, None, 0)))
    bad, null = _data(np.array([1.0, -1.0, 1.0], np.float32))
    null[0][SLOT] = 1.0
    _same_release(*_releases(run, bad, null))


def _log_label_model() -> Model:
    """A linear model whose loss is NaN on a finite record with label < −1 (log1p of it)."""
    base = models.linear_regression(D, fit_intercept=False)

    def per_example_loss(params, x, y):
        return (x @ params["w"][:, 0] - y) ** 2 * (1.0 + jnp.log1p(y))

    return Model(
        "log_label", base.init, base.apply, per_example_loss, task="regression", target="real"
    )


@functools.lru_cache(maxsize=None)
def _log_label() -> Model:
    return _log_label_model()


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_train_releases_the_same_and_reports_the_skipped_examples(sampler):
    """train's up-front check passes (the data are finite); the NaN arises in the loss. The
    release equals the run with the null record key for key, and train warns with the count
    (metrics["nonfinite"]) instead of releasing NaN."""
    model = _log_label()
    config = TrainConfig(model, Hyper(0.5), _plan(sampler))
    bad, null = _data(np.array([1.0, 1.0, 1.0], np.float32), bad_label=-2.0)
    skipped = 0
    for seed in range(3):
        key = jax.random.key(seed)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            params, metrics = train(config, model.init(None), bad, key)
        reference, ref_metrics = train(config, model.init(None), null, key)
        _leaves_close(params, reference)
        count = int(np.sum(metrics["nonfinite"]))
        assert int(np.sum(ref_metrics["nonfinite"])) == 0
        messages = [str(w.message) for w in caught]
        assert (count > 0) == any("contributed nothing" in m for m in messages), messages
        assert not any("non-finite value(s) in the trained parameters" in m for m in messages)
        skipped += count
    if sampler in ("full", "fixed_order"):  # the record is in every (full) or one batch
        assert skipped == 3 * (STEPS if sampler == "full" else 1)


def test_a_sweep_over_seeds_releases_the_same_and_warns():
    """sweeps vmap the run over seeds (each seed its own Poisson batches): the guard runs as a
    select there; the sweep warns with the count like train."""
    model = _log_label()
    config = TrainConfig(model, Hyper(0.5), _plan("poisson"))
    bad, null = _data(np.array([1.0, 1.0, 1.0], np.float32), bad_label=-2.0)
    keys = jax.random.split(jax.random.key(5), 16)
    with pytest.warns(RuntimeWarning, match="contributed nothing"):
        got = sweeps.sweep(config, model.init(None), bad, keys, learning_rate=[0.5, 0.25])
    reference = sweeps.sweep(config, model.init(None), null, keys, learning_rate=[0.5, 0.25])
    _leaves_close(got.params, reference.params)
    assert int(np.sum(got.metrics["nonfinite"])) > 0 == int(np.sum(reference.metrics["nonfinite"]))
