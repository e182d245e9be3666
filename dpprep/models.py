"""Models as pure ``init``/``apply`` functions over pytrees, with per-example losses.

A :class:`Model` bundles what the private learners need: ``init(key)``, ``apply(params, x)``,
``per_example_loss(params, x, y)`` and, for generalised linear models, the hook that lets
:mod:`dpprep.clipping` clip without materialising per-example gradients.

GLM parameters are ``{"w": (d, k), "b": (k,)}`` (``"b"`` absent without an intercept); the
per-example gradient of a GLM is ``x_i ⊗ r_i`` (and ``r_i`` for the bias) where
``r_i = ∂loss_i/∂logits_i`` is the *residual*, so its norm is ``sqrt(||x_i||² + 1)·||r_i||``.

The factories (:func:`linear_regression`, :func:`logistic_regression`, :func:`softmax_regression`,
:func:`mlp`) are :func:`spec_factory`: a model they build carries its ``spec`` (the factory and
its arguments) and compares by it, so two configs built the same way are equal and share one
compilation, whatever objects they hold. A model without a spec (built by hand or by
:mod:`dpprep.frameworks`) compares by its functions.

A **stochastic** model (``stochastic=True``, e.g. with dropout) takes a PRNG key:
``apply(params, x, key=None)`` and ``per_example_loss(params, x, y, key=None)``; the learners give
each example of a batch its own key (from the run key's ``"model"`` stream) and evaluate with
``key=None``, which must be the deterministic (inference) mode.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from typing import Any, Callable, TypeVar

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.typing import ArrayLike

from dpprep.validation import check_finite_array, check_positive, check_positive_int

Params = Any  # a pytree of arrays
PyTree = Any  # any pytree of arrays (e.g. metrics, an evaluation)
Inputs = Any  # an array with a leading example axis, or a dict of such arrays (several inputs)
Array = jax.Array
TARGETS = ("real", "binary", "class")
_F = TypeVar("_F", bound=Callable[..., Any])


def spec_factory(factory: _F) -> _F:
    """Make ``factory``'s models carry their ``spec``: the factory's qualified name and its
    arguments bound to its signature with defaults applied, so ``f(3)``, ``f(num_features=3)`` and
    ``f(3, fit_intercept=True)`` (the default) give models that compare equal (and share a
    compilation). Unhashable arguments give a model without a spec (it compares by identity)."""
    signature = inspect.signature(factory)

    @functools.wraps(factory)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        model = factory(*args, **kwargs)
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        spec = (
            f"{factory.__module__}.{factory.__qualname__}",
            bound.args,
            tuple(sorted(bound.kwargs.items())),
        )
        try:
            hash(spec)
        except TypeError:
            return model
        return dataclasses.replace(model, spec=spec)

    return wrapper  # type: ignore[return-value]


@dataclasses.dataclass(frozen=True, eq=False)
class Model:
    """A differentiable model with per-example losses.

    Attributes:
      name: short identifier.
      init: ``init(key) -> params``.
      apply: ``apply(params, x) -> outputs`` for a batch ``x`` of shape ``(b, ...)`` (``(b, d)``
        for GLMs).
      per_example_loss: ``(params, x, y) -> (b,)`` losses, without any regulariser.
      residual: GLMs only: ``(params, x, y) -> (b, k)``, the derivative of each example's loss with
        respect to its logits. Its presence enables the fast clipping path.
      regularizer: data-independent penalty ``params -> scalar`` (e.g. ridge); it is added to the
        objective outside clipping because it carries no information about any example.
      task: "classification" or "regression" (decides :func:`accuracy`).
      target: what ``y`` holds, checked by :func:`check_targets`: "real" (finite floats),
        "binary" (labels in {0, 1}), "class" (integer labels in ``[0, K)``, ``K`` the output
        dimension of ``apply``) or None (unchecked beyond finiteness).
      stochastic: ``apply`` and ``per_example_loss`` take a ``key`` keyword (e.g. dropout); with
        ``key=None`` they run deterministically (module docstring).
      spec: what the model is (its factory and arguments), by which it compares; None: it
        compares by its functions (identity). :func:`dataclasses.replace` of a model with a spec
        must drop it (``spec=None``) when it changes a function.
    """

    name: str
    init: Callable[[Array], Params]
    apply: Callable[[Params, Array], Array]
    per_example_loss: Callable[[Params, Array, Array], Array]
    residual: Callable[[Params, Array, Array], Array] | None = None
    regularizer: Callable[[Params], Array] | None = None
    task: str = "classification"
    target: str | None = None
    stochastic: bool = False
    spec: Any = None

    def __post_init__(self) -> None:
        if self.target is not None and self.target not in TARGETS:
            raise ValueError(f"target must be one of {TARGETS}, got {self.target!r}")

    def _identity(self) -> tuple[Any, ...]:
        if self.spec is not None:
            return ("spec", self.spec)
        return (
            "functions",
            self.name,
            self.init,
            self.apply,
            self.per_example_loss,
            self.residual,
            self.regularizer,
            self.task,
            self.target,
            self.stochastic,
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Model) and self._identity() == other._identity()

    def __hash__(self) -> int:
        return hash(self._identity())

    @property
    def has_fast_path(self) -> bool:
        return self.residual is not None

    def loss(self, params: Params, x: Array, y: Array, mask: Array | None = None) -> Array:
        """Mean loss over (masked) examples plus the regulariser: the objective F(θ)."""
        losses = self.per_example_loss(params, x, y)
        if mask is None:
            value = jnp.mean(losses)
        else:
            value = jnp.sum(losses * mask) / jnp.maximum(jnp.sum(mask), 1.0)
        if self.regularizer is not None:
            value = value + self.regularizer(params)
        return value


def _glm_params(
    num_features: int, num_outputs: int, fit_intercept: bool
) -> Callable[[Array], Params]:
    def init(key: Array) -> Params:
        del key  # GLMs start at θ = 0 (Hu et al., Wang et al.); the key keeps one init signature.
        params = {"w": jnp.zeros((num_features, num_outputs), jnp.float32)}
        if fit_intercept:
            params["b"] = jnp.zeros((num_outputs,), jnp.float32)
        return params

    return init


def _softmax_cross_entropy(logits: Array, y: Array) -> Array:
    """Per-example ``−log softmax(logits)[y]`` for integer labels ``y`` (optax's, labels cast to
    ``int32`` so float-stored class labels work too)."""
    return optax.losses.softmax_cross_entropy_with_integer_labels(logits, y.astype(jnp.int32))


def _logistic_loss(z: Array, y: Array) -> Array:
    """Per-example ``log(1 + e^z) − y·z`` (binary cross-entropy of a logit), stable. The same
    function as ``optax.losses.sigmoid_binary_cross_entropy``, which computes it as two
    log-sigmoids and so rounds differently; this one form keeps every logistic result (and the
    fast GLM path's residual ``σ(z) − y``, its exact derivative) as it was."""
    return jax.nn.softplus(z) - y * z


def _squared_error(out: Array, y: Array) -> Array:
    """Per-example ``(y − out)²``. ``optax.losses.squared_error(out, y)`` is the same number, but
    it differences the other way round and XLA then fuses the gradient differently: float32
    results move by an ulp (seen in Wang et al.'s Figure 1 (f) at the smoke profile), so this
    form stays and every committed number with it."""
    return (y - out) ** 2


def _logits(params: Params, x: Array) -> Array:
    out = x @ params["w"]
    return out + params["b"] if "b" in params else out


@spec_factory
def linear_regression(
    num_features: int, *, ridge: float = 0.0, fit_intercept: bool = True
) -> Model:
    """Squared loss ``(y − θᵀx − b)²`` with optional ridge ``ridge·||w||²``; targets ``y`` float."""
    check_positive_int(num_features, "num_features")
    ridge = check_positive(ridge, "ridge", allow_zero=True)

    def apply(params, x):
        return _logits(params, x)[:, 0]

    def per_example_loss(params, x, y):
        return _squared_error(apply(params, x), y)

    def residual(params, x, y):
        return (2.0 * (apply(params, x) - y))[:, None]

    regularizer = (lambda params: ridge * jnp.sum(params["w"] ** 2)) if ridge > 0 else None
    return Model(
        "linear_regression",
        _glm_params(num_features, 1, fit_intercept),
        apply,
        per_example_loss,
        residual,
        regularizer,
        task="regression",
        target="real",
    )


@spec_factory
def logistic_regression(num_features: int, *, fit_intercept: bool = True) -> Model:
    """Binary logistic regression (labels in {0, 1}); ``apply`` returns the logit."""
    check_positive_int(num_features, "num_features")

    def apply(params, x):
        return _logits(params, x)[:, 0]

    def per_example_loss(params, x, y):
        return _logistic_loss(apply(params, x), y)

    def residual(params, x, y):
        return (jax.nn.sigmoid(apply(params, x)) - y)[:, None]

    return Model(
        "logistic_regression",
        _glm_params(num_features, 1, fit_intercept),
        apply,
        per_example_loss,
        residual,
        target="binary",
    )


@spec_factory
def softmax_regression(num_features: int, num_classes: int, *, fit_intercept: bool = True) -> Model:
    """Multiclass softmax regression (integer labels); ``apply`` returns logits ``(b, k)``."""
    check_positive_int(num_features, "num_features")
    check_positive_int(num_classes, "num_classes", minimum=2)

    def per_example_loss(params, x, y):
        return _softmax_cross_entropy(_logits(params, x), y)

    def residual(params, x, y):
        return jax.nn.softmax(_logits(params, x), axis=-1) - jax.nn.one_hot(y, num_classes)

    return Model(
        "softmax_regression",
        _glm_params(num_features, num_classes, fit_intercept),
        _logits,
        per_example_loss,
        residual,
        target="class",
    )


_ACTIVATIONS: dict[str, Callable[[Array], Array]] = {
    "softplus": jax.nn.softplus,
    "relu": jax.nn.relu,
    "tanh": jnp.tanh,
    "sigmoid": jax.nn.sigmoid,
}


@spec_factory
def mlp(
    num_features: int,
    hidden: int,
    num_outputs: int,
    *,
    activation: str = "softplus",
    loss: str = "softmax",
) -> Model:
    """A 2-layer perceptron ``W2·act(W1ᵀx + b1) + b2``.

    ``loss`` is "softmax" (integer labels, ``num_outputs`` classes), "logistic" (labels {0,1},
    ``num_outputs == 1``) or "squared" (float targets, ``num_outputs == 1``). Initialisation is
    PyTorch's default, U(±1/sqrt(fan_in)) for weights and biases, as in Wang et al.'s experiments.
    ``w1`` has shape ``(d, hidden)`` so its row ``j`` holds the weights of input feature ``j``.
    """
    check_positive_int(num_features, "num_features")
    check_positive_int(hidden, "hidden")
    check_positive_int(num_outputs, "num_outputs")
    if activation not in _ACTIVATIONS:
        raise ValueError(f"activation must be one of {sorted(_ACTIVATIONS)}, got {activation!r}")
    if loss not in ("softmax", "logistic", "squared"):
        raise ValueError(f"loss must be 'softmax', 'logistic' or 'squared', got {loss!r}")
    if loss != "softmax" and num_outputs != 1:
        raise ValueError(f"loss {loss!r} needs num_outputs == 1, got {num_outputs}")
    act = _ACTIVATIONS[activation]

    def init(key):
        k1, k2, k3, k4 = jax.random.split(key, 4)
        b1, b2 = 1.0 / jnp.sqrt(num_features), 1.0 / jnp.sqrt(hidden)
        u = lambda k, shape, bound: jax.random.uniform(k, shape, jnp.float32, -bound, bound)  # noqa: E731
        return {
            "w1": u(k1, (num_features, hidden), b1),
            "b1": u(k2, (hidden,), b1),
            "w2": u(k3, (hidden, num_outputs), b2),
            "b2": u(k4, (num_outputs,), b2),
        }

    def apply(params, x):
        out = act(x @ params["w1"] + params["b1"]) @ params["w2"] + params["b2"]
        return out if loss == "softmax" else out[:, 0]

    def per_example_loss(params, x, y):
        out = apply(params, x)
        if loss == "softmax":
            return _softmax_cross_entropy(out, y)
        if loss == "logistic":
            return _logistic_loss(out, y)
        return _squared_error(out, y)

    task = "regression" if loss == "squared" else "classification"
    target = {"softmax": "class", "logistic": "binary", "squared": "real"}[loss]
    return Model(
        f"mlp_{activation}_{hidden}", init, apply, per_example_loss, task=task, target=target
    )


def _dtype_kind(array: Any) -> str:
    """The dtype kind of an array without copying it (a JAX array stays on its device)."""
    dtype = array.dtype if hasattr(array, "dtype") else np.asarray(array).dtype
    return np.dtype(dtype).kind


def check_targets(model: Model | None, params: Params, x: Inputs, y: ArrayLike) -> np.ndarray:
    """Host-side check that ``y`` suits ``model.target``; returns it as float32 (real, binary) or
    int32 (class) numpy (model or target None: int32 for integer labels, else float32). ``x``
    (shape ``(n, ...)``, or a dict of such inputs) only gives the input shape from which the number
    of classes ``K`` (the
    output dimension of ``model.apply``) is read. Raises ValueError naming ``y``."""
    y = check_finite_array(y, "y", ndim=1)
    if model is None or model.target is None:
        return y.astype(np.int32 if y.dtype.kind in "iub" else np.float32)
    if model.target == "real":
        return y.astype(np.float32)
    if model.target == "binary":
        if not np.all((y == 0) | (y == 1)):
            bad = y[(y != 0) & (y != 1)]
            raise ValueError(
                f"y must hold binary labels in {{0, 1}} for {model.name}, got e.g. {bad[0]}"
            )
        return y.astype(np.float32)
    if y.dtype.kind not in "iub" and not (y.dtype.kind == "f" and np.all(y == np.round(y))):
        raise ValueError(
            f"y must hold integer class labels for {model.name}, got non-integer {y.dtype} values"
        )
    example = (
        {
            k: jax.ShapeDtypeStruct(
                (1, *np.shape(a)[1:]),
                jnp.int32 if _dtype_kind(a) in "iub" else jnp.float32,
            )
            for k, a in x.items()
        }
        if isinstance(x, dict)
        else jax.ShapeDtypeStruct((1, *np.shape(x)[1:]), jnp.float32)
    )
    out = jax.eval_shape(model.apply, params, example)
    num_classes = out.shape[-1]
    if y.size and (y.min() < 0 or y.max() >= num_classes):
        raise ValueError(
            f"y must hold class labels in [0, {num_classes}) for {model.name}, "
            f"got values in [{y.min()}, {y.max()}]"
        )
    return y.astype(np.int32)


def predict_labels(model: Model, params: Params, x: Array) -> Array:
    """Class predictions of a classifier (argmax of logits, or logit > 0 for binary)."""
    out = model.apply(params, x)
    return jnp.argmax(out, axis=-1) if out.ndim == 2 else (out > 0).astype(jnp.int32)


def check_has_rows(x: Any, name: str = "x") -> None:
    """ValueError when ``x`` (an array or a pytree of arrays, examples first) has 0 rows: a mean
    over it would be NaN. The usual cause is the empty ``x_test`` of a data set that comes without
    a test split."""
    leaves = jax.tree_util.tree_leaves(x)
    if leaves and np.shape(leaves[0])[:1] == (0,):
        raise ValueError(
            f"{name} has 0 rows, so a mean over it is NaN. A data set without a test split "
            "(adult, sepsis, credit_default, insurance) has an empty x_test: make one with "
            "dataset.with_test_split(0.2, seed=0)"
        )


def accuracy(model: Model, params: Params, x: Array, y: Array) -> Array:
    """The fraction of the rows of ``x`` that the classifier ``model`` with ``params`` labels as
    ``y`` (a scalar array; ValueError when ``x`` has 0 rows)."""
    if model.task != "classification":
        raise ValueError(f"accuracy needs a classifier, {model.name} is a {model.task} model")
    check_has_rows(x)
    return jnp.mean(predict_labels(model, params, x) == y)
