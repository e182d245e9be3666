"""Models: per-example losses against closed forms, residuals against autodiff, argument checks."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpprep import models

RNG = np.random.default_rng(0)
X = RNG.normal(size=(12, 4)).astype(np.float32)


def _random_params(model, key=0):
    params = model.init(jax.random.PRNGKey(key))
    leaves, treedef = jax.tree_util.tree_flatten(params)
    keys = jax.random.split(jax.random.PRNGKey(key + 1), len(leaves))
    return jax.tree_util.tree_unflatten(
        treedef, [jax.random.normal(k, p.shape) for k, p in zip(keys, leaves)]
    )


def test_linear_regression_loss_and_ridge():
    model = models.linear_regression(4, ridge=0.5)
    params = _random_params(model)
    y = RNG.normal(size=12).astype(np.float32)
    pred = X @ np.asarray(params["w"])[:, 0] + float(params["b"][0])
    np.testing.assert_allclose(model.per_example_loss(params, X, y), (y - pred) ** 2, rtol=1e-5)
    objective = np.mean((y - pred) ** 2) + 0.5 * np.sum(np.asarray(params["w"]) ** 2)
    np.testing.assert_allclose(model.loss(params, X, y), objective, rtol=1e-5)
    assert model.task == "regression"


def test_logistic_and_softmax_losses_match_closed_forms():
    y01 = (RNG.random(12) < 0.5).astype(np.float32)
    logistic = models.logistic_regression(4)
    p = _random_params(logistic)
    z = X @ np.asarray(p["w"])[:, 0] + float(p["b"][0])
    expected = -(y01 * np.log(1 / (1 + np.exp(-z))) + (1 - y01) * np.log(1 - 1 / (1 + np.exp(-z))))
    np.testing.assert_allclose(logistic.per_example_loss(p, X, y01), expected, rtol=1e-4, atol=1e-6)

    softmax = models.softmax_regression(4, 3)
    p = _random_params(softmax)
    labels = RNG.integers(0, 3, size=12)
    logits = X @ np.asarray(p["w"]) + np.asarray(p["b"])
    log_probs = logits - np.log(np.sum(np.exp(logits), axis=1, keepdims=True))
    np.testing.assert_allclose(
        softmax.per_example_loss(p, X, labels),
        -log_probs[np.arange(12), labels],
        rtol=1e-4,
        atol=1e-6,
    )


@pytest.mark.parametrize(
    "factory,targets",
    [
        (lambda: models.linear_regression(4), RNG.normal(size=12).astype(np.float32)),
        (
            lambda: models.linear_regression(4, fit_intercept=False),
            RNG.normal(size=12).astype(np.float32),
        ),
        (lambda: models.logistic_regression(4), (RNG.random(12) < 0.5).astype(np.float32)),
        (lambda: models.softmax_regression(4, 3), RNG.integers(0, 3, size=12)),
    ],
)
def test_residual_is_the_logit_gradient(factory, targets):
    """The fast clipping path relies on residual = ∂loss_i/∂logits_i."""
    model = factory()
    params = _random_params(model)
    w = params["w"]
    b = params.get("b", jnp.zeros(w.shape[1]))

    def loss_of_logits(logits, i):
        # Rebuild the per-example loss from logits by solving for the model output.
        sub = {"w": jnp.zeros_like(w)}
        if "b" in params:
            sub["b"] = logits
            return model.per_example_loss(sub, X[i : i + 1], targets[i : i + 1])[0]
        raise NotImplementedError

    residual = np.asarray(model.residual(params, X, targets))
    logits = X @ np.asarray(w) + np.asarray(b)
    if "b" in params:
        auto = np.stack([jax.grad(loss_of_logits)(jnp.asarray(logits[i]), i) for i in range(12)])
        np.testing.assert_allclose(residual, auto, rtol=1e-5, atol=1e-6)
    # Either way, the bias-free GLM gradient equals x ⊗ residual.
    grad_w = jax.vmap(
        jax.grad(lambda p, xi, yi: model.per_example_loss(p, xi[None], yi[None])[0]),
        in_axes=(None, 0, 0),
    )(params, jnp.asarray(X), jnp.asarray(targets))["w"]
    np.testing.assert_allclose(grad_w, X[:, :, None] * residual[:, None, :], rtol=1e-5, atol=1e-6)


def test_mask_weights_the_mean():
    model = models.softmax_regression(4, 3)
    params = _random_params(model)
    labels = RNG.integers(0, 3, size=12)
    mask = np.array([1, 0] * 6, np.float32)
    np.testing.assert_allclose(
        model.loss(params, X, labels, mask), model.loss(params, X[::2], labels[::2]), rtol=1e-6
    )


@pytest.mark.parametrize(
    "loss,outputs,targets",
    [
        ("softmax", 3, RNG.integers(0, 3, size=12)),
        ("logistic", 1, (RNG.random(12) < 0.5).astype(np.float32)),
        ("squared", 1, RNG.normal(size=12).astype(np.float32)),
    ],
)
def test_mlp_shapes_init_and_losses(loss, outputs, targets):
    model = models.mlp(4, 8, outputs, activation="tanh", loss=loss)
    params = model.init(jax.random.PRNGKey(0))
    assert params["w1"].shape == (4, 8) and params["w2"].shape == (8, outputs)
    assert (
        float(jnp.max(jnp.abs(params["w1"]))) <= 0.5
        and float(jnp.max(jnp.abs(params["w2"]))) <= 8**-0.5
    )
    losses = model.per_example_loss(params, X, targets)
    assert losses.shape == (12,) and bool(jnp.all(jnp.isfinite(losses)))
    assert not model.has_fast_path
    assert model.task == ("regression" if loss == "squared" else "classification")


def test_accuracy_and_predictions():
    softmax = models.softmax_regression(2, 3, fit_intercept=False)
    params = {"w": jnp.array([[1.0, 0.0, -1.0], [0.0, 1.0, 0.0]])}
    x = np.array([[2.0, 0.0], [0.0, 2.0], [-2.0, 0.0]], np.float32)
    np.testing.assert_array_equal(models.predict_labels(softmax, params, x), [0, 1, 2])
    assert float(models.accuracy(softmax, params, x, np.array([0, 1, 1]))) == pytest.approx(2 / 3)
    logistic = models.logistic_regression(2, fit_intercept=False)
    np.testing.assert_array_equal(
        models.predict_labels(logistic, {"w": jnp.array([[1.0], [0.0]])}, x), [1, 0, 0]
    )
    with pytest.raises(ValueError, match="classifier"):
        models.accuracy(
            models.linear_regression(2), models.linear_regression(2).init(None), x, np.zeros(3)
        )


def test_bad_arguments():
    with pytest.raises(ValueError, match="num_features"):
        models.softmax_regression(0, 3)
    with pytest.raises(ValueError, match="num_classes"):
        models.softmax_regression(3, 1)
    with pytest.raises(ValueError, match="ridge"):
        models.linear_regression(3, ridge=-1.0)
    with pytest.raises(ValueError, match="activation"):
        models.mlp(3, 4, 2, activation="gelu2")
    with pytest.raises(ValueError, match="loss"):
        models.mlp(3, 4, 2, loss="hinge")
    with pytest.raises(ValueError, match="num_outputs"):
        models.mlp(3, 4, 2, loss="logistic")


def test_mlp_losses_match_closed_forms():
    for loss, outputs, targets in (
        ("softmax", 3, RNG.integers(0, 3, size=12)),
        ("logistic", 1, (RNG.random(12) < 0.5).astype(np.float32)),
    ):
        model = models.mlp(4, 5, outputs, loss=loss)
        params = model.init(jax.random.PRNGKey(2))
        out = np.asarray(model.apply(params, X), np.float64)
        if loss == "softmax":
            expected = -(out - np.log(np.sum(np.exp(out), axis=1, keepdims=True)))[
                np.arange(12), targets
            ]
        else:
            expected = np.log1p(np.exp(out)) - targets * out
        np.testing.assert_allclose(
            model.per_example_loss(params, X, targets), expected, rtol=1e-5, atol=1e-6
        )


@pytest.mark.parametrize(
    "model,target",
    [
        (models.linear_regression(4), "real"),
        (models.logistic_regression(4), "binary"),
        (models.softmax_regression(4, 3), "class"),
        (models.mlp(4, 5, 3), "class"),
        (models.mlp(4, 5, 1, loss="logistic"), "binary"),
        (models.mlp(4, 5, 1, loss="squared"), "real"),
    ],
)
def test_targets_are_checked_against_the_model(model, target):
    assert model.target == target
    params = model.init(jax.random.PRNGKey(0))
    good = {
        "real": RNG.normal(size=12),
        "binary": RNG.integers(0, 2, size=12),
        "class": np.arange(12) % 3,
    }[target]
    y = models.check_targets(model, params, X, good)
    assert y.dtype == (np.int32 if target == "class" else np.float32)
    np.testing.assert_array_equal(y, good.astype(y.dtype))
    with pytest.raises(ValueError, match="y contains"):
        models.check_targets(model, params, X, np.where(np.arange(12) == 0, np.nan, good))
    if target == "binary":
        for bad in (np.where(np.arange(12) == 0, 2, good), good - 0.5, -good):
            with pytest.raises(ValueError, match=r"y must hold binary labels in \{0, 1\}"):
                models.check_targets(model, params, X, bad)
    if target == "class":  # K = 3 read from the output dimension
        np.testing.assert_array_equal(
            models.check_targets(model, params, X, good.astype(float)), good
        )
        for bad in (np.where(np.arange(12) == 0, 3, good), np.where(np.arange(12) == 0, -1, good)):
            with pytest.raises(ValueError, match=r"y must hold class labels in \[0, 3\)"):
                models.check_targets(model, params, X, bad)
        with pytest.raises(ValueError, match="integer class labels"):
            models.check_targets(model, params, X, good + 0.25)


def test_unchecked_targets_and_bad_target_kind():
    custom = models.Model("custom", lambda k: {}, lambda p, x: x, lambda p, x, y: y)
    assert custom.target is None
    assert models.check_targets(custom, {}, X, np.array([5, -3])).dtype == np.int32
    assert models.check_targets(None, {}, X, np.array([0.5])).dtype == np.float32
    with pytest.raises(ValueError, match="target"):
        models.Model("custom", lambda k: {}, lambda p, x: x, lambda p, x, y: y, target="ordinal")


def test_factories_return_equal_models_per_argument_set():
    """Equal arguments (however spelled, defaults included) give models that compare (and hash)
    equal by their spec, so configs built the same way compare equal and share a compilation;
    different arguments give different models."""
    same = [
        (
            models.linear_regression(3),
            models.linear_regression(num_features=3, ridge=0.0, fit_intercept=True),
        ),
        (
            models.logistic_regression(4, fit_intercept=False),
            models.logistic_regression(4, fit_intercept=False),
        ),
        (models.softmax_regression(4, 3), models.softmax_regression(4, num_classes=3)),
        (models.mlp(3, 5, 2), models.mlp(3, 5, 2, activation="softplus", loss="softmax")),
    ]
    for a, b in same:
        assert a == b and hash(a) == hash(b)
    assert models.linear_regression(3, ridge=0.5) != models.linear_regression(3)
    assert models.mlp(3, 5, 2) != models.mlp(3, 6, 2)
    assert models.logistic_regression(3) != models.linear_regression(3)
    with pytest.raises(ValueError, match="activation"):  # errors are raised, not cached
        models.mlp(3, 5, 2, activation="nope")
    with pytest.raises(ValueError, match="activation"):
        models.mlp(3, 5, 2, activation="nope")


def test_spec_factory_gives_unhashable_arguments_no_spec():
    """A model built from unhashable arguments carries no spec: it compares by its functions, so
    two builds differ (and each equals only itself)."""
    calls = []

    @models.spec_factory
    def make(size, extra=None):
        calls.append(size)
        return models.Model("made", lambda k: {}, lambda p, x: x, lambda p, x, y: y)

    a, b = make(2), make(size=2, extra=None)
    assert a == b and hash(a) == hash(b) and a.spec is not None  # other functions, one spec
    c, d = make([1]), make([1])  # a list is unhashable: no spec
    assert c.spec is None and c != d and c == c
    assert calls == [2, 2, [1], [1]]
