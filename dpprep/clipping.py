"""Per-example gradient clipping: ``Σ_i mask_i · g_i · min(1, C/||g_i||)``.

The core primitive is :func:`clipped_grad`: it turns *any* loss ``loss_fn(params, batch, *args)``
over *any* batch pytree (leading axis = examples) into a function returning the sum of the
clipped per-example gradients, their norms and (``has_aux``) the per-example auxiliary outputs,
with a PRNG key split per example (``prng_argnum``, e.g. for dropout) and any other argument
(e.g. model state) passed through unbatched — in the spirit of jax_privacy's ``clipped_grad``:

>>> import jax.numpy as jnp
>>> loss = lambda params, batch: jnp.sum((batch["x"] @ params - batch["y"]) ** 2)
>>> grad_fn = clipped_grad(loss, l2_clip_norm=1.0)
>>> batch = {"x": jnp.array([[3.0, 4.0], [0.1, 0.0]]), "y": jnp.zeros((2, 1))}
>>> out = grad_fn(jnp.ones((2, 1)), batch)
>>> [round(float(v), 3) for v in out.norms]             # ‖2·(xᵀθ − y)·x‖ per example
[70.0, 0.02]
>>> # clipped to C = 1: (42, 56)·1/70 and (0.02, 0)
>>> [round(float(v), 3) for v in out.grad[:, 0]]
[0.62, 0.8]

The same entry takes a :class:`~dpprep.models.Model` and ``(x, y)`` batches, with two paths that
agree (tested to 1e-5 relative):

- **fast** (GLMs, ``model.has_fast_path``): a GLM's per-example gradient is the outer product
  ``x_i ⊗ r_i`` (plus ``r_i`` for the bias), whose norm is ``sqrt(||x_i||² + 1)·||r_i||``; the
  clipped sum is then one matrix product ``Xᵀ(s ⊙ R)``. No per-example gradient is materialised,
  so the cost is that of a non-private gradient.
- **taps** (any model whose parameters enter through dense, convolution, bias or scale
  layers; :mod:`dpprep.taps`): one batched backward pass to each layer's output, a dense layer's
  norms as ``‖a_i‖·‖δ_i‖`` and its clipped sum as one product ``aᵀ(s ⊙ δ)`` (no per-example
  gradient formed), a convolution's per-example kernel gradients from its input and ``δ_i``;
  ``"auto"`` takes it for any loss where it applies (tested equal to ``vmap``);
- **vmap** (any model): :func:`clipped_grad` of the model's loss, which materialises the
  ``(b, ...)`` per-example gradients by ``vmap(grad)``.

A per-point transform of the features (e.g. centring, masking) is an engine extension with its
own fast path: :class:`dpprep.features.AffineFeatures`.

Norms are overflow-safe at the cost of a plain sum of squares: each row's squared norm is
computed directly, and only a row where that overflowed (float32 squares overflow above ~1.8e19)
takes the value computed on the row times ``2⁻¹⁰⁰`` (an exact power-of-two scale: no division, no
rounding), rescaled by ``2¹⁰⁰``; so features up to ~1e30 give finite, accurate norms
(:func:`_safe_norms`). ``l2_clip_norm`` may be a traced scalar (so sweeps can vmap over it) and may
be ``inf`` (no clipping). The regulariser is not part of the clipped sum.

**Never above the bound, in float32.** A norm computed in float32 can fall below the true norm by
a few units of roundoff per summed square, and scaling the gradient rounds again, so clipping by
the computed norm alone can leave an example's contribution at ``C·(1 + 1e-7·d)``. The clip
factor uses the computed norm raised by :func:`rounding_pad`, which bounds the worst-case float32
error of the whole computation, so every contribution to the clipped sum is at most ``C``
(property-tested in float64 on float32 outputs). The general path sums the squares pairwise
(:func:`pairwise_row_sum`), so the pad grows with ``log2`` of the model size (``1 + 1.4e-6`` for
one leaf of 26k parameters, ``1 + 2.0e-6`` for 11M: a clipped example keeps its signal);
the GLM paths sum ``d + k`` squares by XLA's reduction and pad for any order (``1 + (d+k+10)·u``).
The reported ``norms`` are the computed ones, unpadded.

**A non-finite gradient contributes zero.** An example whose gradient has a NaN or inf entry (a NaN
or inf feature or label, or a finite record on which the loss is NaN, e.g. a log of a negative
number) has a non-finite norm; it gets weight 0 and counts as a zero row of the sum
(:func:`nan_safe`, jax_privacy's ``nan_safe``), on every path (vmap, microbatched, per-example
keys, the GLM paths), masked-in or not; on finite data the sum is bitwise what it was, at the
cost of a reduction over the batch's norms. Without that, ``0 · NaN = NaN`` would make the whole
release NaN whenever that record (or a padded slot holding its data) is in the batch: its presence
would show, whatever the clip bound. The sensitivity stays ``C``: such an example is treated as if
its gradient were zero. How many masked-in examples were skipped is
``ClippedGrad.nonfinite`` (a non-private diagnostic). Data checks up front (``train`` refuses NaN
inputs) are a convenience; the guarantee does not rest on them.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from dpprep import taps
from dpprep.models import Array, Model, Params
from dpprep.tracing import everywhere

Batch = Any  # a pytree of arrays, leading axis = examples

METHODS = ("auto", "fast", "taps", "vmap", "none")
#: The methods a loss function (not a Model) takes.
LOSS_METHODS = ("auto", "taps", "vmap")


def check_method(method: str, name: str = "method") -> str:
    """The one check of a clipping method name (also used by the learners before compiling)."""
    if method not in METHODS:
        raise ValueError(f"{name} must be one of {METHODS}, got {method!r}")
    return method


#: float32's unit roundoff.
_ROUNDOFF = 2.0**-24


def rounding_pad(roundings: int) -> float:
    """``1 + (roundings + 8)·u`` (``u = 2⁻²⁴``): a float32 norm whose every squared term passed
    through at most ``roundings`` roundings (its square and the additions it took part in), raised
    by this factor, is at least the true norm of the vector as then scaled and summed. A sum of
    nonnegative terms each rounded at most ``r`` times is within ``γ_r = r·u/(1 − r·u)`` of the
    exact sum, whatever the order (Higham, *Accuracy and Stability of Numerical Algorithms*,
    §4.2), and the square root halves that; the ``8`` covers ``γ``'s denominator, the root, the
    clip factor's division and the scaling. For ``k`` squares summed by an unspecified reduction
    (XLA's) ``roundings = k``; summed pairwise (:func:`pairwise_row_sum`) it is
    ``1 + ceil(log2 k)``, which is what keeps the pad below ``1 + 1e-5`` at any model size."""
    return 1.0 + (roundings + 8) * _ROUNDOFF


def pairwise_depth(size: int) -> int:
    """``ceil(log2 size)``: the additions each term of :func:`pairwise_row_sum` takes part in."""
    return max(0, int(size - 1).bit_length())


def pairwise_row_sum(a: Array) -> Array:
    """Row sums of a ``(b, m)`` array by explicit pairwise halving (``m`` padded with exact zeros to
    a power of two, then ``a[:, :h] + a[:, h:]`` until one column is left), so that each term goes
    through exactly :func:`pairwise_depth` ``(m)`` additions in an order XLA does not choose (it
    does
    not reassociate floating-point additions): the error bound of :func:`rounding_pad` then holds
    for how the sum is computed, not for how a reduction might be."""
    m = a.shape[1]
    width = 1 << pairwise_depth(m)
    if width != m:
        a = jnp.pad(a, ((0, 0), (0, width - m)))
    while width > 1:
        width //= 2
        a = a[:, :width] + a[:, width:]
    return a[:, 0]


def _pairwise_list_sum(terms: list[Array]) -> Array:
    """The sum of a list of arrays by the same pairwise halving (depth ``ceil(log2 len)``)."""
    while len(terms) > 1:
        half = (len(terms) + 1) // 2
        terms = [
            terms[i] + terms[i + half] if i + half < len(terms) else terms[i] for i in range(half)
        ]
    return terms[0]


def norm_roundings(shapes: list[tuple[int, ...]]) -> int:
    """The roundings each squared term of :func:`_global_norms` goes through for per-example
    leaves of ``shapes`` (leading example axis): its square, the pairwise additions within its
    leaf and those across leaves (the ``roundings`` of :func:`rounding_pad`)."""
    sizes = [int(np.prod(shape[1:])) for shape in shapes]
    return 1 + max(pairwise_depth(size) for size in sizes) + pairwise_depth(len(sizes))


#: The precision of every product that forms a clipped sum, whatever the matmul precision of the
#: context (a user's ``matmul_precision``, ``jax.default_matmul_precision``, a backend's default).
#: A GPU's default for float32 is TF32, which rounds each entry of ``g_i`` and its clip factor to 10
#: mantissa bits inside the product: an example's contribution then exceeds ``C`` by up to ~1e-3
#: relative (1.00063·C measured on an H200 through the softmax fast path at JAX's default), far
#: above :func:`rounding_pad`. The model's own products (logits, hidden layers) may run at any
#: precision: the norm is computed from the gradient they give, and only the sum must not round
#: that gradient again.
CLIPPED_SUM_PRECISION = jax.lax.Precision.HIGHEST


def clipped_product(a: Array, b: Array) -> Array:
    """``a @ b`` at :data:`CLIPPED_SUM_PRECISION`: the GLM paths' clipped sum ``xᵀ(c ⊙ r)``
    (the general path's ``Σ_i c_i·g_i`` is a ``tensordot`` at the same precision). Each keeps the
    product it replaced, so a CPU, which computes float32 products in float32 at any precision,
    gives the same numbers as before the pin, bit for bit."""
    return jnp.matmul(a, b, precision=CLIPPED_SUM_PRECISION)


def clip_factors(norms: Array, l2_clip_norm: Array, mask: Array | None) -> Array:
    """``mask_i · min(1, C/||g_i||)``, and 0 where ``||g_i||`` is not finite: the weight of each
    example's gradient in the clipped sum. A weight of 0 alone does not remove a non-finite
    gradient (``0 · NaN = NaN``): its rows are zeroed too (:func:`nan_safe`)."""
    # min(1, C/||g||) written so that ||g|| = 0 and C = inf both give 1 without NaNs.
    scale = jnp.minimum(1.0, l2_clip_norm / jnp.maximum(norms, 1e-30))
    scale = scale if mask is None else scale * mask
    return jnp.where(jnp.isfinite(norms), scale, 0.0)


def nan_safe(
    finite: Array,
    contract: Callable[[Any], Any],
    rows: Any,
    contract_zeroed: Callable[[Any], Any] | None = None,
) -> Any:
    """``contract(rows)`` as if the rows ``i`` where ``finite[i]`` is False were zero in every leaf
    of ``rows`` (leading axis: examples), so that a non-finite per-example gradient contributes
    exactly zero to the clipped sum (jax_privacy's ``clipped_grad(..., nan_safe=True)``). One
    record with a NaN or inf (in its features, its label or its loss) would otherwise make the
    release NaN whatever its weight (``0 · NaN = NaN``), and so reveal whether it was in the
    batch — or, as a padded slot's data, whether it is in the data set at all.

    ``contract`` must be a weighted sum over the rows. It runs as is, and a ``lax.cond`` on "every
    row finite" computes the sum again without those rows only when some row is not finite
    (``contract_zeroed(rows)``; default: ``contract`` of a copy of ``rows`` with those rows zeroed).
    So a batch of finite gradients pays one reduction over ``finite`` and a select of the result:
    no pass over ``rows`` and no copy of them (the finite branch returns zeros), and the sum is
    bitwise the plain one. Under ``vmap`` (sweeps over seeds, each with its own batch) the cond's
    predicate is "every row of every batch finite", so it stays a cond rather than becoming a
    select that runs both branches; each batch then takes its own sum (plain where all its rows
    are finite), so no batch's result depends on another's."""
    if contract_zeroed is None:

        def contract_zeroed(rows: Any) -> Any:
            return contract(jax.tree_util.tree_map(lambda a: _zero_rows(finite, a), rows))

    plain = contract(rows)
    ok = jnp.all(finite)
    safe = jax.lax.cond(
        everywhere(ok),
        lambda rows: jax.tree_util.tree_map(lambda a: jnp.zeros(a.shape, a.dtype), plain),
        contract_zeroed,
        rows,
    )
    return jax.tree_util.tree_map(lambda a, b: jnp.where(ok, a, b), plain, safe)


def _zero_rows(finite: Array, a: Array) -> Array:
    """``a`` with its rows ``i`` (leading axis) where ``finite[i]`` is False set to 0."""
    keep = finite.reshape(finite.shape + (1,) * (a.ndim - 1))
    return jnp.where(keep, a, jnp.zeros((), a.dtype))


#: Elements of per-example gradients zeroed at a time when some are not finite (1 MiB of
#: float32): the memory that the zeroing adds, whatever the model and batch size.
NAN_SAFE_CHUNK = 2**18


def _weighted_row_sum(scale: Array, grads: Params, finite: Array) -> Params:
    """``Σ_i scale_i · g_i`` over the rows of every leaf of ``grads``, the rows where ``finite``
    is False counting zero (:func:`nan_safe`).

    The leaves go to the cond as the ``(b, m)`` views the product reads (the buffer the norms'
    overflow fallback holds too): in their own layout XLA would materialise the per-example
    gradients a second time. Without the finite rows the sum runs over chunks of rows
    (``NAN_SAFE_CHUNK`` elements), each zeroed where needed and multiplied in: a zeroed copy of
    the whole batch would double the memory of the per-example gradients in every run, since
    XLA allocates a branch's buffers up front."""
    leaves, tree = jax.tree_util.tree_flatten(grads)
    rows = [g.reshape(g.shape[0], -1) for g in leaves]
    size = finite.shape[0]
    chunk = max(1, min(size, NAN_SAFE_CHUNK // max(1, sum(g.shape[1] for g in rows))))
    count = -(-size // chunk)

    def zeroed(rows: list[Array]) -> list[Array]:
        def body(j: Array, totals: list[Array]) -> list[Array]:
            # The last chunk ends at the last row; rows an earlier chunk took count zero there.
            start = jnp.minimum(j * chunk, size - chunk)
            keep = jax.lax.dynamic_slice_in_dim(finite, start, chunk) & (
                start + jnp.arange(chunk) >= j * chunk
            )
            weight = jnp.where(keep, jax.lax.dynamic_slice_in_dim(scale, start, chunk), 0.0)
            return [
                total
                + jnp.tensordot(
                    weight,
                    _zero_rows(keep, jax.lax.dynamic_slice_in_dim(g, start, chunk)),
                    axes=1,
                    precision=CLIPPED_SUM_PRECISION,
                )
                for total, g in zip(totals, rows)
            ]

        zeros = [jnp.zeros(g.shape[1:], jnp.result_type(scale, g)) for g in rows]
        return jax.lax.fori_loop(0, count, body, zeros)

    sums = nan_safe(
        finite,
        lambda rows: [
            jnp.tensordot(scale, g, axes=1, precision=CLIPPED_SUM_PRECISION) for g in rows
        ],
        rows,
        zeroed,
    )
    return jax.tree_util.tree_unflatten(
        tree, [total.reshape(g.shape[1:]) for total, g in zip(sums, leaves)]
    )


def nonfinite_count(norms: Array, mask: Array | None) -> Array:
    """The number of (masked-in) examples whose computed norm is not finite — those whose
    gradient has a NaN or inf entry (the norms are overflow-safe, so a finite gradient has a
    finite norm unless its norm exceeds float32's range), which contributed nothing to the
    clipped sum. A non-private diagnostic (int32 scalar)."""
    bad = ~jnp.isfinite(norms)
    if mask is not None:
        bad = bad & (mask > 0)
    return jnp.sum(bad, dtype=jnp.int32)


class ClippedGrad(NamedTuple):
    """What :func:`clipped_grad` returns.

    Attributes:
      grad: ``Σ_i mask_i · g_i · min(1, C/||g_i||)``, a pytree like the params (the *sum*: the
        privatizer adds noise to it and divides by the normaliser).
      norms: ``(b,)`` per-example global gradient norms before clipping (NaN when not computed).
      aux: with ``has_aux``, the per-example auxiliary outputs (leading axis ``b``); else None.
      nonfinite: the number of masked-in examples whose gradient was not finite (a NaN or inf
        entry: a NaN or inf in the record, or a loss that is NaN on it) and so contributed
        exactly zero to ``grad`` (:func:`nan_safe`); an int32 scalar, or None where not computed
        (``method="none"``, or a clipped sum built elsewhere). Like ``norms`` and ``aux``, a
        non-private diagnostic, never part of the release.
    """

    grad: Params
    norms: Array
    aux: Any = None
    nonfinite: Any = None


def batch_size_of(batch: Batch, name: str = "batch") -> int:
    """The shared leading (example) axis of every leaf of ``batch``; ValueError naming the leaves
    that disagree (or a leaf without one). Runs on shapes only, so it works on traced batches."""
    leaves = jax.tree_util.tree_leaves_with_path(batch)
    if not leaves:
        raise ValueError(f"{name} has no array leaves")
    sizes: dict[int, str] = {}
    for path, leaf in leaves:
        shape = np.shape(leaf)
        if not shape:
            raise ValueError(
                f"{name}{jax.tree_util.keystr(path)} is a scalar; every leaf of a batch "
                "needs a leading example axis"
            )
        sizes.setdefault(shape[0], jax.tree_util.keystr(path))
    if 0 in sizes:
        raise ValueError(f"{name} is empty: {name}{sizes[0]} has no examples on its leading axis")
    if len(sizes) > 1:
        described = ", ".join(f"{name}{where or ''} has {size}" for size, where in sizes.items())
        raise ValueError(f"the leaves of {name} disagree on the example axis: {described}")
    return next(iter(sizes))


def _checked_mask(mask: ArrayLike | None, size: int) -> Array | None:
    """The 0/1 weights of a batch's examples. Concrete masks must hold only 0 and 1 (ValueError: a
    weight of 5 would let one example contribute 5·C); a traced mask is clamped to [0, 1], so that
    no weight can raise an example's contribution above ``C`` (a 0/1 mask is unchanged)."""
    if mask is None:
        return None
    if np.shape(mask) != (size,):
        raise ValueError(
            f"mask must have shape ({size},), one 0/1 weight per example, got {np.shape(mask)}"
        )
    if not isinstance(mask, jax.core.Tracer):
        values = np.asarray(mask, np.float64)
        if not np.all((values == 0) | (values == 1)):
            bad = values[(values != 0) & (values != 1)]
            raise ValueError(
                f"mask must hold 0 (padding) or 1 (a real example) only, got e.g. {bad[0]!r}"
            )
    return jnp.clip(jnp.asarray(mask, jnp.float32), 0.0, 1.0)


def check_microbatch_size(microbatch_size: int | None) -> int | None:
    """The one check of a microbatch size: a positive int, or None (all examples at once)."""
    if microbatch_size is not None and (
        isinstance(microbatch_size, bool)
        or not isinstance(microbatch_size, int)
        or microbatch_size < 1
    ):
        raise ValueError(f"microbatch_size must be a positive int or None, got {microbatch_size!r}")
    return microbatch_size


def _check_clip_norm(l2_clip_norm: ArrayLike | None) -> None:
    if l2_clip_norm is None:
        raise ValueError("l2_clip_norm is required (a float > 0, or inf for no clipping)")
    if not isinstance(l2_clip_norm, jax.core.Tracer) and not np.all(
        np.asarray(l2_clip_norm, np.float64) > 0
    ):
        raise ValueError(f"l2_clip_norm must be > 0 (inf: no clipping), got {l2_clip_norm!r}")


#: The loss's positional arguments before its extra ones: ``(params, batch, *args)``.
LOSS_LEADING_ARGS = 2


def _key_index(prng_argnum: int | None) -> int | None:
    """The index into the extra arguments ``args`` of ``prng_argnum`` (which counts
    ``(params, batch, *args)``); ValueError for a position that is not an extra argument."""
    if prng_argnum is None:
        return None
    if isinstance(prng_argnum, bool) or not isinstance(prng_argnum, (int, np.integer)):
        raise TypeError(f"prng_argnum must be an int or None, got {type(prng_argnum).__name__}")
    if prng_argnum < LOSS_LEADING_ARGS:
        where = {0: "the params", 1: "the batch"}.get(int(prng_argnum), "no argument")
        raise ValueError(
            f"prng_argnum={prng_argnum} points at {where}: prng_argnum counts the loss's "
            "positional arguments (params, batch, *args) as jax_privacy and JAX do, so the key "
            "of loss(params, batch, key) is prng_argnum=2 (earlier versions counted from the first "
            "argument after the batch)"
        )
    return int(prng_argnum) - LOSS_LEADING_ARGS


def _check_key_argument(prng_argnum: int | None, args: tuple) -> None:
    """The loss's argument ``prng_argnum`` (counting params and batch) was given and is a PRNG
    key (a typed key, or a raw ``uint32[2]`` one)."""
    index = _key_index(prng_argnum)
    if index is None:
        return
    if index >= len(args):
        raise ValueError(
            f"prng_argnum={prng_argnum} (counting params and batch) but the loss got only "
            f"{LOSS_LEADING_ARGS + len(args)} positional argument(s)"
        )
    key = args[index]
    dtype, shape = getattr(key, "dtype", None), np.shape(key)
    typed = dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)
    if not (typed or (dtype == np.uint32 and shape[-1:] == (2,))):
        raise ValueError(
            f"prng_argnum={prng_argnum} (counting params and batch) is not a PRNG key: got "
            f"{dtype} of shape {shape}. It counts the loss's positional arguments "
            "(params, batch, *args) as jax_privacy and JAX do: the key of "
            "loss(params, batch, state, key) is prng_argnum=3"
        )


def clipped_grad(
    loss_fn: Callable[..., Any] | Model,
    *,
    l2_clip_norm: ArrayLike,
    has_aux: bool = False,
    keep_batch_dim: bool = True,
    prng_argnum: int | None = None,
    method: str = "auto",
    microbatch_size: int | None = None,
) -> Callable[..., ClippedGrad]:
    """Per-example clipped gradients of any loss over any batch pytree — the one clipping entry.

    Returns ``grad_fn(params, batch, *args, mask=None) -> ClippedGrad``: for each example ``i``
    (a slice along the leading axis of every leaf of ``batch``) the gradient ``g_i`` of
    ``loss_fn(params, example_i, *args)`` with respect to ``params``, scaled by
    ``min(1, C/||g_i||)`` (global L2 norm over every leaf; overflow-safe) and summed with weights
    ``mask`` (0/1, shape ``(b,)``: padded slots of a fixed-shape batch count 0). This is the
    per-example clipping of DP-SGD (Abadi et al. 2016); its sum has L2 sensitivity ``C`` under
    add/remove of one example, whatever the loss.

    **One example is one slice along the leading axis**, by definition: the primitive cannot
    tell which axis holds the records (a ``(d, b)`` array is as valid a batch as a ``(b, d)``
    one), and the sensitivity is that of a slice. A record laid out over several slices is
    several examples: in a transposed single-leaf batch (features on the leading axis) slice
    ``j`` holds feature ``j`` of every record, so one record touches all ``d`` slices, each of
    whose clipped gradients it can move by ``2·C``: up to ``2·d·C`` in all (3.7·C measured at
    ``d = 3``); likewise a record split over rows, or the same record in two rows. Lay every
    leaf out records first (one row per record), or use a plan's clipped gradient
    (:meth:`dpprep.plan.DPPlan.clipped_grad`), which takes only the plan's batches
    (``plan.pad`` rows per leaf, drawn by the plan from data of ``plan.n`` rows per leaf) and
    refuses any other shape.

    ``loss_fn`` may also be a :class:`~dpprep.models.Model` (batches ``(x, y)``): its loss, with
    the GLM fast path as a specialisation when the model has one (``method="auto"``; ``"fast"``,
    ``"taps"``, ``"vmap"`` force a path, tested equal; ``"none"``: the plain gradient of the
    summed loss, for unclipped non-private runs only, norms NaN).

    Args:
      loss_fn: ``(params, batch, *args) -> scalar`` (with ``has_aux``: ``(scalar, aux)``), called
        on one example at a time; or a Model.
      l2_clip_norm: the bound ``C`` (> 0; ``inf``: no clipping; may be a traced value, so sweeps
        can vmap over it).
      has_aux: ``loss_fn`` returns ``(loss, aux)``; the per-example ``aux`` is returned stacked.
      keep_batch_dim: each example keeps a leading axis of size 1 (so a loss written for batches
        works unchanged); False passes the bare example.
      prng_argnum: the position of a PRNG key among ``loss_fn``'s positional arguments
        ``(params, batch, *args)``, numbered as jax_privacy and JAX number them (the key of
        ``loss_fn(params, batch, key)`` is 2; 0 and 1, the params and the batch, are refused); the
        key is split into one key per example (e.g. for dropout). Every other argument (e.g.
        model state) is passed unbatched to every example.
      method: "auto" (the taps of :mod:`dpprep.taps` where every use of a parameter has one and
        a dense or convolution layer gains from them, else ``vmap``), "taps" (an error, at trace
        time, where some use has none) or "vmap" (``vmap(grad)``); a Model also takes "fast" and
        "none" (above).
      microbatch_size: compute the per-example gradients ``m`` examples at a time (a ``lax.scan``
        over microbatches summing their clipped contributions), so memory holds ``m`` per-example
        gradients instead of ``b``. The batch is padded to a multiple of ``m`` with masked slots
        (rows of zeros: padding holds no record), and a microbatch whose mask is all 0
        (Poisson padding, which the samplers put last) is skipped, not computed — except under
        ``vmap`` over batches (a sweep over seeds), where JAX runs both branches of the skip.
        The sum is the unbatched one up to float32 summation order (tested); None: all at once.
        A Model's GLM fast path ignores it (it holds no per-example gradients).

    Raises ``ValueError`` (at trace time, before compilation) when the batch is empty or its
    leaves disagree on the example axis, when ``loss_fn`` does not return a scalar per example
    (or, with ``has_aux``, a pair), or when a mask is not 0/1.
    """
    check_method(method)
    if isinstance(loss_fn, Model):
        if has_aux or prng_argnum is not None or not keep_batch_dim:
            raise ValueError(
                "has_aux, prng_argnum and keep_batch_dim are for loss functions; a Model's loss "
                "has none of them"
            )
        return _model_clipped_grad(
            loss_fn, l2_clip_norm, method, check_microbatch_size(microbatch_size)
        )
    if method not in LOSS_METHODS:
        raise ValueError(
            f"method={method!r} is for a Model; a loss function takes one of {LOSS_METHODS}"
        )
    if not callable(loss_fn):
        raise TypeError(f"loss_fn must be callable (or a Model), got {type(loss_fn).__name__}")
    key_index = _key_index(prng_argnum)
    _check_clip_norm(l2_clip_norm)
    check_microbatch_size(microbatch_size)

    def example_loss(params, example, *args):
        if keep_batch_dim:
            example = jax.tree_util.tree_map(lambda a: a[None], example)
        out = loss_fn(params, example, *args)
        return out if has_aux else (out, None)

    def grad_fn(params: Params, batch: Batch, *args: Any, mask: Array | None = None) -> ClippedGrad:
        size = batch_size_of(batch)
        if key_index is not None:
            _check_key_argument(prng_argnum, args)
        first = jax.tree_util.tree_map(lambda a: a[0], batch)
        try:
            value = jax.eval_shape(lambda p, e, *a: example_loss(p, e, *a), params, first, *args)
        except (TypeError, ValueError) as err:
            if has_aux:
                raise ValueError(
                    "has_aux=True: loss_fn must return a pair (loss, aux), and calling it failed: "
                    f"{type(err).__name__}: {err}"
                ) from err
            raise
        if has_aux and not (isinstance(value, tuple) and len(value) == 2):
            raise ValueError(
                "has_aux=True: loss_fn must return a pair (loss, aux), got "
                f"{type(value).__name__} of shape {getattr(value, 'shape', None)}"
            )
        loss_value = value[0]
        if getattr(loss_value, "shape", None) != ():
            raise ValueError(
                "loss_fn must return a scalar per example (the loss of one example); got "
                f"shape {getattr(loss_value, 'shape', None)} — reduce it (e.g. .sum() or [0])"
            )
        weights = _checked_mask(mask, size)
        axes: list[int | None] = [None] * len(args)
        if key_index is not None:
            args = list(args)  # type: ignore[assignment]  # a mutable copy of the positional args
            # (a list now)
            args[key_index] = jax.random.split(args[key_index], size)  # type: ignore[index]
            axes[key_index] = 0
        clip = jnp.asarray(l2_clip_norm, jnp.float32)
        analysis = _analysis(method, example_loss, params, first, args, axes)

        def clipped(batch: Batch, weights: Array | None, *args: Any) -> tuple[Params, Array, Any]:
            if analysis is not None:
                return _clipped_from_taps(analysis, params, batch, args, axes, clip, weights)
            grads, aux = jax.vmap(jax.grad(example_loss, has_aux=True), in_axes=(None, 0, *axes))(
                params, batch, *args
            )
            norms = _global_norms(grads)
            roundings = norm_roundings([np.shape(g) for g in jax.tree_util.tree_leaves(grads)])
            scale = clip_factors(norms * rounding_pad(roundings), clip, weights)
            return _weighted_row_sum(scale, grads, jnp.isfinite(norms)), norms, aux

        if microbatch_size is None or microbatch_size >= size:
            summed, norms, aux = clipped(batch, weights, *args)
        else:
            summed, norms, aux = _microbatched(
                clipped, microbatch_size, size, batch, weights, args, axes
            )
        return ClippedGrad(summed, norms, aux if has_aux else None, nonfinite_count(norms, weights))

    return grad_fn


def _analysis(
    method: str,
    example_loss: Callable[..., Any],
    params: Params,
    example: Any,
    args: Sequence[Any],
    axes: Sequence[int | None],
) -> taps.Analysis | None:
    """The layer taps of one example's loss (:mod:`dpprep.taps`) when the clipped sum is to come
    from them: ``method="taps"`` (a use no tap covers is an error), or ``"auto"`` when every use is
    covered and some dense or convolution tap saves work over ``vmap``; else None (``vmap``)."""
    if method == "vmap":
        return None
    firsts = [
        a if axis is None else jax.tree_util.tree_map(lambda v: v[0], a)
        for a, axis in zip(args, axes)
    ]
    try:
        analysis = taps.analyse(example_loss, params, example, *firsts)
    except taps.Unsupported as err:
        if method == "taps":
            raise ValueError(f"method='taps': {err}; use method='vmap' (or 'auto')") from err
        return None
    return analysis if method == "taps" or taps.worthwhile(analysis) else None


def _clipped_from_taps(
    analysis: taps.Analysis,
    params: Params,
    batch: Batch,
    args: Sequence[Any],
    axes: Sequence[int | None],
    clip: Array,
    weights: Array | None,
) -> tuple[Params, Array, Any]:
    """:func:`clipped_grad`'s clipped sum from layer taps: dense taps by their norms' product and
    one weighted product (no per-example gradient formed), every other leaf's per-example
    gradients materialised and summed as on the ``vmap`` path. Each example's norm is that of the
    values its contribution is made of, raised by :func:`rounding_pad`; non-finite examples count
    zero (:func:`nan_safe`)."""
    tapped = taps.tapped_pass(analysis, params, batch, args, axes)
    leaves, tree = jax.tree_util.tree_flatten(params)
    size = batch_size_of(batch)
    per_leaf: dict[int, Array] = {}
    dense = []
    for tap, a, delta in zip(analysis.taps, tapped.activations, tapped.deltas):
        if tap.kind == "dense":
            dense.append((tap, a, delta))
        else:
            grads = taps.example_grads(tap, leaves[tap.leaf], a, delta)
            per_leaf[tap.leaf] = per_leaf[tap.leaf] + grads if tap.leaf in per_leaf else grads
    order = sorted(per_leaf)
    rows = {i: per_leaf[i].reshape(size, -1) for i in order}
    dense_of = {tap.leaf: (a.reshape(size, -1), d.reshape(size, -1)) for tap, a, d in dense}

    def leaf_norm(i: int) -> Array:
        """Leaf ``i``'s per-example norm, overflow-safe (:func:`_safe_norms`)."""
        if i in rows:
            return _safe_norms(lambda c: pairwise_row_sum(jnp.square(c * rows[i])))
        if i in dense_of:
            a, d = dense_of[i]
            return _safe_norms(
                lambda c: (
                    pairwise_row_sum(jnp.square(float(np.sqrt(c)) * a))  # √c: exact
                    * pairwise_row_sum(jnp.square(float(np.sqrt(c)) * d))
                )
            )
        return jnp.zeros((size,), jnp.float32)  # a leaf the loss does not use

    # The global norm over the leaves' norms goes through the same function as the vmap path's
    # (a column per leaf holding its norm has the leaf's norm): one rule, and one place a bug in
    # it would show on every path.
    norms = _global_norms([leaf_norm(i)[:, None] for i in range(len(leaves))])
    # A materialised leaf's square: as norm_roundings. A dense tap's: the two sums' squares and
    # additions, their product, and the realised a_i·(s_i·δ_i) (two more roundings). Then the
    # leaf norm's root and its square again in _global_norms (3 more), and the sum over leaves.
    roundings = [1 + pairwise_depth(g.shape[1]) for g in rows.values()]
    roundings += [
        5 + pairwise_depth(a.shape[1]) + pairwise_depth(d.shape[1]) for a, d in dense_of.values()
    ]
    pad = rounding_pad(max(roundings) + 3 + pairwise_depth(len(leaves)))
    scale = clip_factors(norms * pad, clip, weights)
    finite = jnp.isfinite(norms)
    sums: list[Array | None] = [None] * len(leaves)
    if rows:
        summed = _weighted_row_sum(scale, [per_leaf[i] for i in order], finite)
        for i, total in zip(order, summed):
            sums[i] = total
    for tap, a, d in dense:

        def contract(rows: tuple[Array, Array], tap: taps.Tap = tap) -> Array:
            a, d = rows
            weighted = scale.reshape((size,) + (1,) * (d.ndim - 1)) * d
            return taps.dense_sum(tap, leaves[tap.leaf], a, weighted, CLIPPED_SUM_PRECISION)

        sums[tap.leaf] = nan_safe(finite, contract, (a, d))
    sums = [jnp.zeros_like(leaf) if total is None else total for leaf, total in zip(leaves, sums)]
    return jax.tree_util.tree_unflatten(tree, sums), norms, tapped.aux


def _microbatched(
    clipped: Callable[..., tuple[Params, Array, Any]],
    m: int,
    size: int,
    batch: Batch,
    weights: Array | None,
    args: Sequence[Any],
    axes: list[int | None],
) -> tuple[Params, Array, Any]:
    """``clipped`` over ``ceil(size/m)`` microbatches of ``m`` examples in a ``lax.scan``, summing
    the clipped sums; padded slots (to a multiple of ``m``) are masked, and a microbatch whose mask
    is all 0 is skipped (``lax.cond``). Norms (and aux) come back for the ``size`` slots; a skipped
    microbatch's norms and aux are zeros (not computed: its slots are all padding)."""
    count = -(-size // m)
    extra = count * m - size
    mask = jnp.ones((size,), jnp.float32) if weights is None else weights

    def split(a):
        return jnp.pad(a, [(0, extra)] + [(0, 0)] * (a.ndim - 1)).reshape(count, m, *a.shape[1:])

    # Padding rows are zeros, masked 0: padding holds no record (a copy of the first example
    # would be a second copy of a real record wherever a slot is counted by mistake). The
    # per-example keys are randomness, not records (and a key array has no zeros): the first
    # key is repeated. A loss that is not finite on a zero row is zeroed by the nan_safe guard.
    def pad_rows(a, record=True):
        if not extra:
            return a
        if record:
            return jnp.concatenate([a, jnp.zeros((extra, *a.shape[1:]), a.dtype)])
        return jnp.concatenate([a, jnp.broadcast_to(a[:1], (extra, *a.shape[1:]))])

    micro_batch = jax.tree_util.tree_map(
        lambda a: pad_rows(jnp.asarray(a)).reshape(count, m, *np.shape(a)[1:]), batch
    )
    micro_mask = split(mask)
    micro_args = [
        pad_rows(a, record=False).reshape(count, m, *a.shape[1:]) if axis == 0 else a
        for a, axis in zip(args, axes)
    ]
    shapes = jax.eval_shape(
        lambda b, w, *a: clipped(b, w, *a),
        jax.tree_util.tree_map(lambda a: a[0], micro_batch),
        micro_mask[0],
        *[a[0] if axis == 0 else a for a, axis in zip(micro_args, axes)],
    )
    zeros = jax.tree_util.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)

    def body(
        total: Params, chunk: tuple[Batch, Array, list[Any]]
    ) -> tuple[Params, tuple[Array, Any]]:
        part, w, part_args = chunk
        full = [a if axis == 0 else b for a, b, axis in zip(part_args, args, axes)]
        summed, norms, aux = jax.lax.cond(
            jnp.any(w > 0),
            lambda: clipped(part, w, *full),
            lambda: (zeros[0], jnp.zeros((m,), jnp.float32), zeros[2]),
        )
        return jax.tree_util.tree_map(jnp.add, total, summed), (norms, aux)

    scanned_args = [a if axis == 0 else jnp.zeros((count,)) for a, axis in zip(micro_args, axes)]
    total, (norms, aux) = jax.lax.scan(body, zeros[0], (micro_batch, micro_mask, scanned_args))
    unsplit = lambda a: a.reshape(count * m, *a.shape[2:])[:size]  # noqa: E731
    return total, unsplit(norms), jax.tree_util.tree_map(unsplit, aux)


def _model_loss(model: Model) -> Callable[[Params, tuple[Array, Array]], Array]:
    """One example's loss of a :class:`~dpprep.models.Model` on an ``(x, y)`` batch of size 1."""
    return lambda params, batch: model.per_example_loss(params, batch[0], batch[1])[0]


def per_example_grads(model: Model, params: Params, x: Array, y: Array) -> Params:
    """Per-example gradients (leading batch axis on every leaf), via ``vmap(grad)``."""
    single = lambda p, xi, yi: _model_loss(model)(p, (xi[None], yi[None]))  # noqa: E731
    return jax.vmap(jax.grad(single), in_axes=(None, 0, 0))(params, x, y)


# Overflow fallback of the row norms: a row whose plain sum of squares is not finite takes the
# sum over ``2⁻¹⁰⁰ × row`` (exact: a power of two, no division) with the root scaled back by
# ``2¹⁰⁰``. Squares of entries below ~1e11 underflow there, which is below float32 rounding in a
# row that overflowed (its norm is above ~1.8e19). The fallback sits behind a ``lax.cond`` on
# "some row overflowed", so an unbatched run (``train``) only pays for the plain sum; under
# ``vmap`` with a batched batch (sweeps over seeds) the cond becomes a select and both sums run.
_DOWN = 2.0**-100
_UP = 2.0**100


def _safe_norms(sq_norms: Callable[[float], Array]) -> Array:
    """``sqrt(sq_norms(1))`` per row, falling back to ``2¹⁰⁰·sqrt(sq_norms(2⁻¹⁰⁰))`` on the rows
    where the plain squared norm overflowed; ``sq_norms(c)`` is the squared norm of ``c × row``."""
    root = lambda sq: jnp.sqrt(jnp.maximum(sq, 0.0))  # noqa: E731
    plain = sq_norms(1.0)

    def fallback(plain: Array) -> Array:
        return jnp.where(jnp.isfinite(plain), root(plain), _UP * root(sq_norms(_DOWN)))

    return jax.lax.cond(jnp.all(jnp.isfinite(plain)), root, fallback, plain)


def _global_norms(tree: Params) -> Array:
    """Per-example global L2 norms over every leaf (leading batch axis), overflow-safe; the squares
    are summed pairwise within and across leaves (:func:`norm_roundings` bounds the roundings)."""
    leaves = [g.reshape(g.shape[0], -1) for g in jax.tree_util.tree_leaves(tree)]
    return _safe_norms(
        lambda c: _pairwise_list_sum([pairwise_row_sum(jnp.square(c * g)) for g in leaves])
    )


def _clipped_sum_vmap(
    model: Model,
    params: Params,
    x: Array,
    y: Array,
    l2_clip_norm: Array,
    mask: Array | None = None,
    microbatch_size: int | None = None,
    method: str = "auto",
) -> tuple[Params, Array]:
    """General path (:func:`clipped_grad` of the model's loss, by layer taps or ``vmap`` as
    ``method`` says). Returns (clipped gradient sum, per-example norms before clipping)."""
    out = clipped_grad(
        _model_loss(model),
        l2_clip_norm=l2_clip_norm,
        microbatch_size=microbatch_size,
        method=method if method in LOSS_METHODS else "auto",
    )(params, (x, y), mask=mask)
    return out.grad, out.norms


def _feature_norms(x: Array, bias: bool) -> Array:
    """``sqrt(||x_i||² + bias)`` per row: one plain pass over the batch (:func:`_safe_norms`)."""
    return _safe_norms(lambda c: jnp.sum(jnp.square(c * x), axis=1) + (c * c if bias else 0.0))


def _clipped_sum_fast(
    model: Model,
    params: Params,
    x: Array,
    y: Array,
    l2_clip_norm: Array,
    mask: Array | None = None,
) -> tuple[Params, Array]:
    """GLM path: norms as products of norms, the clipped sum as one matrix product."""
    if not model.has_fast_path:
        raise ValueError(f"model {model.name!r} has no fast clipping path; use the vmap path")
    # (b, k); has_fast_path checked above
    residual = model.residual(params, x, y)  # type: ignore[misc]
    r_norm = jnp.linalg.norm(residual, axis=1)
    feature_norms = _feature_norms(x, "b" in params)
    norms = feature_norms * r_norm
    # The realised contribution x_i ⊗ (c_i r_i): d (+1) squares, k squares, two more roundings.
    pad = rounding_pad(x.shape[1] + int("b" in params) + residual.shape[1] + 2)
    # A NaN or inf in x_i or r_i makes the norm non-finite and the factor 0; its r_i row is
    # zeroed (b × k, cheap), and its x_i row too where x_i is not finite (nan_safe: x.T @ weighted
    # would carry 0 · NaN = NaN into every coordinate). That cond depends on the batch alone.
    weighted = jnp.where(
        jnp.isfinite(norms)[:, None],
        residual * clip_factors(norms * pad, l2_clip_norm, mask)[:, None],
        0.0,
    )
    summed = {
        "w": nan_safe(jnp.isfinite(feature_norms), lambda x: clipped_product(x.T, weighted), x)
    }
    if "b" in params:
        summed["b"] = jnp.sum(weighted, axis=0)
    return summed, norms


def _grad_sum_unclipped(
    model: Model,
    params: Params,
    x: Array,
    y: Array,
    mask: Array | None = None,
    key: Array | None = None,
) -> tuple[Params, Array]:
    """``method="none"``: the plain gradient of the (masked) loss sum, without per-example
    gradients (for unclipped runs of any model, e.g. CorrDP-SGD's networks). Norms are NaN: they
    are not computed."""

    def total(p):
        losses = (
            model.per_example_loss(p, x, y, key=key)
            if model.stochastic and key is not None
            else model.per_example_loss(p, x, y)
        )
        return jnp.sum(losses if mask is None else losses * mask)

    return jax.grad(total)(params), jnp.full((x.shape[0],), jnp.nan, jnp.float32)


def _model_clipped_grad(
    model: Model, l2_clip_norm: ArrayLike, method: str, microbatch_size: int | None = None
) -> Callable[..., ClippedGrad]:
    """:func:`clipped_grad` of a Model on ``(x, y)`` batches: the GLM fast path when the model has
    one (``method="auto"``), otherwise the general path (in microbatches of ``microbatch_size``:
    the fast path and ``"none"`` hold no per-example gradients, so they ignore it); ``"none"``:
    unclipped."""
    if method == "none":
        if not isinstance(l2_clip_norm, jax.core.Tracer) and np.any(
            np.isfinite(np.asarray(l2_clip_norm, np.float64))
        ):
            raise ValueError(
                f"method='none' clips nothing: l2_clip_norm must be inf, got {l2_clip_norm!r}"
            )
    else:
        _check_clip_norm(l2_clip_norm)
    use_fast = method == "fast" or (method == "auto" and model.has_fast_path)
    if method == "fast" and not model.has_fast_path:
        raise ValueError(f"model {model.name!r} has no fast clipping path; use method='vmap'")

    def grad_fn(
        params: Params,
        batch: tuple[Array, Array],
        mask: Array | None = None,
        key: Array | None = None,
    ) -> ClippedGrad:
        x, y = batch
        weights = _checked_mask(mask, batch_size_of(batch))
        if method == "none":
            grad, norms = _grad_sum_unclipped(model, params, x, y, weights, key)
        # each example its own key (e.g. its dropout mask)
        elif model.stochastic and key is not None:
            loss = lambda p, b, k: model.per_example_loss(p, b[0], b[1], key=k)[0]  # type: ignore[call-arg]  # noqa: E731
            out = clipped_grad(
                loss,
                l2_clip_norm=l2_clip_norm,
                prng_argnum=2,
                microbatch_size=microbatch_size,
                method=method if method in LOSS_METHODS else "auto",
            )(params, (x, y), key, mask=weights)
            grad, norms = out.grad, out.norms
        elif use_fast:
            grad, norms = _clipped_sum_fast(
                model, params, x, y, jnp.asarray(l2_clip_norm, jnp.float32), weights
            )
        else:
            grad, norms = _clipped_sum_vmap(
                model,
                params,
                x,
                y,
                jnp.asarray(l2_clip_norm, jnp.float32),
                weights,
                microbatch_size,
                method,
            )
        if method == "none":
            return ClippedGrad(grad, norms)
        return ClippedGrad(grad, norms, None, nonfinite_count(norms, weights))

    return grad_fn
