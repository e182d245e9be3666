"""Per-example clipping from layer taps: one batched backward pass to each layer's *output*, and the
per-example weight gradients (or only their norms) formed from each layer's input and that
cotangent, instead of a backward pass per example.

:func:`dpprep.clipping.clipped_grad` computes ``Σ_i min(1, C/‖g_i‖)·g_i``. Its general path
materialises every ``g_i`` by ``vmap(grad)``; for a dense layer that is a ``(b, k, c)`` array of
outer products, written and read again to take norms and the weighted sum, which costs far more
than the layer's non-private gradient (30–100× at B = 256–1024 on a CPU: ``benchmarks/
per_example_norms.py``). Here the loss of one example is traced once to a jaxpr and every use of a
parameter is found:

- **dense** (``dot_general`` with a weight as its right operand and one row per example, as
  ``x @ W`` is): ``g_i = a_i ⊗ δ_i`` (input row ``a_i``, output cotangent ``δ_i``), so
  ``‖g_i‖² = ‖a_i‖²·‖δ_i‖²`` and ``Σ_i s_i·g_i = aᵀ(s ⊙ δ)``: the norms and the clipped sum without
  ever forming ``g_i`` (the "ghost norm" of Goodfellow 2015 and Li et al. 2022, with the clipped
  sum taken from the same taps as in Bu et al. 2023's book-keeping, so no second backward pass);
- **convolution** (``conv_general_dilated``, one group): ``g_i`` as one contraction of the input's
  patches with ``δ_i`` (``lax.conv_general_dilated_patches``), then the weighted row sum of the
  general path;
- **any other use** a tap accepts (a bias's ``add``, a scale's ``mul``, a ``dot_general`` of
  another shape): ``g_i`` by the primitive's own VJP at ``(a_i, δ_i)``.

The analysis of a dense layer with a bias (one tap each), and the clipped sum it gives, the
``vmap`` path's:

>>> import jax, jax.numpy as jnp
>>> from dpprep import clipping, taps
>>> loss = lambda p, batch: jnp.sum(jnp.tanh(batch @ p["w"] + p["b"]))
>>> params = {"w": jnp.ones((3, 2)), "b": jnp.zeros(2)}
>>> batch = jnp.arange(12.0).reshape(4, 3) / 10
>>> one = lambda p, example: (loss(p, example[None]), None)  # as clipped_grad calls it
>>> [(t.primitive.name, t.kind) for t in taps.analyse(one, params, batch[0]).taps]
[('dot_general', 'dense'), ('add', 'vjp')]
>>> clip = lambda m: clipping.clipped_grad(loss, l2_clip_norm=0.5, method=m)
>>> tapped, plain = clip("taps")(params, batch), clip("vmap")(params, batch)
>>> bool(jnp.allclose(tapped.grad["w"], plain.grad["w"], rtol=1e-5))
True

A parameter reaches its use through layout operations only (reshape, transpose, broadcast, dtype
conversion), whose VJP takes the use's gradient back to the parameter's shape. Any other use of a
parameter (two parameters multiplied, a parameter inside a ``scan`` or a custom derivative, …)
makes :func:`analyse` return the reason, and the caller takes the ``vmap`` path.

**Privacy does not rest on this analysis.** Each example's loss is still evaluated on that
example alone (the interpreter runs under ``vmap`` over examples, so no operation can mix them),
its contribution is scaled by the norm of exactly the values that are summed (``a_i`` and ``δ_i``
for a dense tap, ``g_i`` otherwise), and non-finite examples count zero as on every path: were a
tap wrong, the sum would hold a wrong gradient of sensitivity ``C``, not a larger sensitivity.
The analysis is tested to give the ``vmap`` path's clipped sum (``tests/test_taps.py``).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend import core as jcore

from dpprep.models import Array, Params

#: Layout operations a parameter may pass through on its way to a tap (each linear, so its VJP maps
#: a use's gradient back to the parameter).
LAYOUT = frozenset(
    {
        "reshape",
        "transpose",
        "broadcast_in_dim",
        "convert_element_type",
        "squeeze",
        "copy",
        "copy_p",
    }
)
#: Of those, the ones that keep every entry once (a permutation of the entries): a dense tap's
#: norm may be taken at its use only through these.
_NORM_KEEPING = frozenset({"reshape", "transpose", "squeeze", "copy", "copy_p"})
#: Binary operations a parameter may enter as one operand, the other being data.
TAPPED = frozenset({"dot_general", "conv_general_dilated", "add", "add_any", "sub", "mul"})
#: Calls whose body the interpreter enters (their parameters' uses are found inside).
_NESTED = frozenset({"jit", "pjit", "closed_call", "core_call"})


class Unsupported(Exception):
    """A parameter is used in a way no tap covers."""


@dataclasses.dataclass(frozen=True)
class Tap:
    """One use of a parameter leaf: ``primitive(operands)`` with the leaf, through ``chain``
    (layout operations), as operand ``position``; ``kind``: "dense", "conv" or "vjp"."""

    leaf: int
    chain: tuple[tuple[Any, dict], ...]
    primitive: Any
    params: dict
    position: int
    kind: str = "vjp"


@dataclasses.dataclass(frozen=True)
class Analysis:
    """The taps of one example's loss (from :func:`analyse`)."""

    jaxpr: Any  # ClosedJaxpr of (params, example, *args) -> outputs
    out_tree: Any
    taps: tuple[Tap, ...]


class _Raw:
    """A value that is a parameter leaf seen through layout operations."""

    def __init__(self, leaf: int, chain: tuple[tuple[Any, dict], ...]):
        self.leaf, self.chain = leaf, chain


def _bind(primitive: Any, bind_params: dict, *args: Any) -> list[Any]:
    out = primitive.bind(*args, **bind_params)
    return list(out) if primitive.multiple_results else [out]


def apply_chain(chain: Sequence[tuple[Any, dict]], value: Array) -> Array:
    """The layout operations of a tap's chain applied to a parameter leaf."""
    for primitive, bind_params in chain:
        (value,) = _bind(primitive, bind_params, value)
    return value


def _interpret(
    jaxpr: Any,
    consts: Sequence[Any],
    args: Sequence[Any],
    raws: Sequence[_Raw | None],
    on_tap: Callable[[Any, int, _Raw, list[Any], Any], Any],
) -> tuple[list[Any], list[_Raw | None]]:
    """Evaluates ``jaxpr``; every tapped use of a parameter goes through ``on_tap(eqn, position,
    raw, operands, output) -> output``. Raises :class:`Unsupported` on any other use."""
    env: dict[Any, Any] = {}
    raw_of: dict[Any, _Raw] = {}

    def read(var: Any) -> Any:
        return var.val if isinstance(var, jcore.Literal) else env[var]

    for var, value in zip(jaxpr.constvars, consts):
        env[var] = value
    for var, value, raw in zip(jaxpr.invars, args, raws):
        env[var] = value
        if raw is not None:
            raw_of[var] = raw
    for eqn in jaxpr.eqns:
        operands = [read(v) for v in eqn.invars]
        in_raws = [None if isinstance(v, jcore.Literal) else raw_of.get(v) for v in eqn.invars]
        name = eqn.primitive.name
        if all(r is None for r in in_raws):
            with eqn.ctx.manager:
                outs = _bind(eqn.primitive, eqn.primitive.get_bind_params(eqn.params), *operands)
        elif name in _NESTED and "jaxpr" in eqn.params:
            closed = eqn.params["jaxpr"]
            outs, out_raws = _interpret(closed.jaxpr, closed.consts, operands, in_raws, on_tap)
            for var, raw in zip(eqn.outvars, out_raws):
                if raw is not None:
                    raw_of[var] = raw
        elif name in LAYOUT and len(operands) == 1:
            (raw,) = in_raws
            assert raw is not None
            bind_params = eqn.primitive.get_bind_params(eqn.params)
            outs = _bind(eqn.primitive, bind_params, *operands)
            raw_of[eqn.outvars[0]] = _Raw(raw.leaf, raw.chain + ((eqn.primitive, bind_params),))
        elif name in TAPPED and len(operands) == 2 and sum(r is not None for r in in_raws) == 1:
            position = 0 if in_raws[0] is not None else 1
            bind_params = eqn.primitive.get_bind_params(eqn.params)
            (out,) = _bind(eqn.primitive, bind_params, *operands)
            raw = in_raws[position]
            assert raw is not None
            outs = [on_tap(eqn, position, raw, operands, out)]
        else:
            raise Unsupported(
                f"a parameter enters {name!r}"
                + (" with another parameter" if name in TAPPED else "")
                + ", which no tap covers"
            )
        for var, value in zip(eqn.outvars, outs):
            env[var] = value
    out_raws = [None if isinstance(v, jcore.Literal) else raw_of.get(v) for v in jaxpr.outvars]
    return [read(v) for v in jaxpr.outvars], out_raws


def _dense(eqn: Any, position: int, chain: Sequence[tuple[Any, dict]]) -> bool:
    """A ``dot_general`` whose per-example gradient is one outer product ``a_i ⊗ δ_i``: the weight
    the right operand (through norm-keeping layout only), operands and result in float32 or
    wider, no batch dimensions, and one row of the left operand per example."""
    if eqn.primitive.name != "dot_general" or position != 1:
        return False
    if any(p.name not in _NORM_KEEPING for p, _ in chain):
        return False
    # The norms' pad and the clipped sum's products assume float32 or wider: a bfloat16 or float16
    # product would round a_i and s_i·δ_i far more than rounding_pad allows.
    wide = (jnp.float32, jnp.float64)
    if any(v.aval.dtype not in wide for v in (*eqn.invars, *eqn.outvars)):
        return False
    (contract_lhs, _), (batch_lhs, batch_rhs) = eqn.params["dimension_numbers"]
    if batch_lhs or batch_rhs:
        return False
    shape = eqn.invars[0].aval.shape
    free = [size for axis, size in enumerate(shape) if axis not in contract_lhs]
    return math.prod(free) == 1


def _conv(eqn: Any, position: int) -> bool:
    return (
        eqn.primitive.name == "conv_general_dilated"
        and position == 1
        and eqn.params["feature_group_count"] == 1
        and eqn.params["batch_group_count"] == 1
        # an input dilation (a transposed convolution) has no strided-slice view
        and all(factor == 1 for factor in eqn.params["lhs_dilation"])
    )


def _leaf_raws(leaves: int, inputs: int) -> list[_Raw | None]:
    """The jaxpr inputs' raw views: the first ``leaves`` are the parameter leaves themselves."""
    return [_Raw(i, ()) if i < leaves else None for i in range(inputs)]


def analyse(example_loss: Callable[..., Any], params: Params, example: Any, *args: Any) -> Analysis:
    """Traces ``example_loss(params, example, *args)`` (one example) and finds every use of a
    parameter leaf; raises :class:`Unsupported` (with the reason) when some use has no tap."""
    leaves = jax.tree_util.tree_leaves(params)
    for leaf in leaves:
        if not jnp.issubdtype(jnp.result_type(leaf), jnp.inexact):
            raise Unsupported("a parameter leaf is not floating-point")
    closed, shapes = jax.make_jaxpr(example_loss, return_shape=True)(params, example, *args)
    out_tree = jax.tree_util.tree_structure(shapes)
    raws = _leaf_raws(len(leaves), len(closed.jaxpr.invars))
    taps: list[Tap] = []

    def on_tap(eqn: Any, position: int, raw: _Raw, operands: list[Any], out: Any) -> Any:
        bind_params = eqn.primitive.get_bind_params(eqn.params)
        taps.append(Tap(raw.leaf, raw.chain, eqn.primitive, bind_params, position))
        taps[-1] = dataclasses.replace(
            taps[-1],
            kind="dense"
            if _dense(eqn, position, raw.chain)
            else "conv"
            if _conv(eqn, position)
            else "vjp",
        )
        return out

    abstract = [jax.ShapeDtypeStruct(v.aval.shape, v.aval.dtype) for v in closed.jaxpr.invars]

    def run(*flat: Any) -> list[Any]:
        outs, out_raws = _interpret(closed.jaxpr, closed.consts, flat, raws, on_tap)
        if any(r is not None for r in out_raws):
            raise Unsupported("the loss returns a parameter")
        return outs

    jax.eval_shape(run, *abstract)
    # A leaf used twice has one gradient, the sum of its uses': no use of it may be a ghost.
    uses = np.bincount([t.leaf for t in taps], minlength=len(leaves))
    taps = [
        dataclasses.replace(t, kind="vjp") if t.kind == "dense" and uses[t.leaf] > 1 else t
        for t in taps
    ]
    return Analysis(closed, out_tree, tuple(taps))


def worthwhile(analysis: Analysis) -> bool:
    """Whether the taps save work over ``vmap(grad)``: some tap is a dense or convolution one."""
    return any(t.kind in ("dense", "conv") for t in analysis.taps)


@dataclasses.dataclass
class Tapped:
    """What one batched pass through the taps gives: per tap, the other operand ``a`` and the
    output cotangent ``delta`` (each with a leading example axis), the stacked losses' ``aux``."""

    activations: list[Array]
    deltas: list[Array]
    aux: Any


def tapped_pass(
    analysis: Analysis,
    params: Params,
    batch: Any,
    args: Sequence[Any],
    axes: Sequence[int | None],
) -> Tapped:
    """One example at a time under ``vmap`` (so no operation mixes examples): the loss's forward
    pass with a zero added to each tap's output, and the gradient of the loss with respect to
    those zeros — the cotangents ``δ_i`` — without any parameter gradient."""
    leaves = jax.tree_util.tree_leaves(params)
    closed = analysis.jaxpr
    raws = _leaf_raws(len(leaves), len(closed.jaxpr.invars))
    out_shapes: list[Any] = []

    def shapes_on_tap(eqn: Any, position: int, raw: _Raw, operands: list[Any], out: Any) -> Any:
        out_shapes.append(jax.ShapeDtypeStruct(out.shape, out.dtype))
        return out

    def example_flat(example: Any, *rest: Any) -> list[Any]:
        return leaves + jax.tree_util.tree_leaves((example, *rest))

    def first(tree: Any, axis: int | None) -> Any:
        return tree if axis is None else jax.tree_util.tree_map(lambda a: a[0], tree)

    jax.eval_shape(
        lambda e, *r: _interpret(
            closed.jaxpr, closed.consts, example_flat(e, *r), raws, shapes_on_tap
        )[0],
        first(batch, 0),
        *[first(a, ax) for a, ax in zip(args, axes)],
    )

    def loss_of(zeros: list[Array], example: Any, *rest: Any) -> tuple[Array, tuple[Any, list]]:
        count = iter(range(len(zeros)))
        recorded: list[Any] = []

        def on_tap(eqn: Any, position: int, raw: _Raw, operands: list[Any], out: Any) -> Any:
            recorded.append(operands[1 - position])
            return out + zeros[next(count)]

        outs, _ = _interpret(
            closed.jaxpr, closed.consts, example_flat(example, *rest), raws, on_tap
        )
        loss, aux = jax.tree_util.tree_unflatten(analysis.out_tree, outs)
        return loss, (aux, recorded)

    zeros = [jnp.zeros(s.shape, s.dtype) for s in out_shapes]
    deltas, (aux, activations) = jax.vmap(
        jax.grad(loss_of, has_aux=True), in_axes=(None, 0, *axes)
    )(zeros, batch, *args)
    return Tapped(activations, deltas, aux)


def _conv_kernel_grad(params: dict, kernel_shape: tuple[int, ...], a: Array, delta: Array) -> Array:
    """One example's gradient with respect to a convolution's kernel (``kernel_shape``, in the
    kernel's own layout): for each offset in the window, the input seen through that offset
    (strided slices of the padded input: data movement only) contracted with the output
    cotangent over the output positions — the kernel gradient a convolution computes, one
    example at a time, without forming a patch matrix by another convolution."""
    numbers = params["dimension_numbers"]
    lhs_spec, rhs_spec, out_spec = numbers.lhs_spec, numbers.rhs_spec, numbers.out_spec
    spatial = len(lhs_spec) - 2
    window = [kernel_shape[d] for d in rhs_spec[2:]]
    strides, dilation = params["window_strides"], params["rhs_dilation"]
    # Batch, spatial..., channels.
    x = jnp.transpose(a, (lhs_spec[0], *lhs_spec[2:], lhs_spec[1]))
    d = jnp.transpose(delta, (out_spec[0], *out_spec[2:], out_spec[1]))
    zero = jnp.zeros((), x.dtype)
    x = jax.lax.pad(x, zero, [(0, 0, 0), *[(lo, hi, 0) for lo, hi in params["padding"]], (0, 0, 0)])
    out_sizes = d.shape[1:-1]
    views = []
    for offset in np.ndindex(*window):
        start = [0] + [k * r for k, r in zip(offset, dilation)] + [0]
        limit = [x.shape[0]]
        limit += [s + (n - 1) * t + 1 for s, n, t in zip(start[1:-1], out_sizes, strides)]
        limit += [x.shape[-1]]
        views.append(jax.lax.slice(x, start, limit, [1, *strides, 1]))
    stacked = jnp.stack(views, axis=-2)  # batch, positions..., window, cin
    axes = tuple(range(1 + spatial))
    grad = jnp.tensordot(stacked, d, axes=(axes, axes))  # window, cin, cout
    grad = grad.reshape(*window, grad.shape[-2], grad.shape[-1])  # spatial..., in, out
    source = {rhs_spec[1]: spatial, rhs_spec[0]: spatial + 1}
    source |= {axis: i for i, axis in enumerate(rhs_spec[2:])}
    return grad.transpose([source[axis] for axis in range(grad.ndim)])


def _use(tap: Tap, a: Array, w: Array) -> Array:
    """The tapped operation on one example's operand ``a`` and the parameter's view ``w``."""
    operands = (w, a) if tap.position == 0 else (a, w)
    (out,) = _bind(tap.primitive, tap.params, *operands)
    return out


def example_grads(tap: Tap, leaf: Array, a: Array, delta: Array) -> Array:
    """Per-example gradients ``(b, *leaf.shape)`` of the parameter leaf through this use: the use's
    gradient (a convolution's from its patches, any other by the primitive's VJP at
    ``(a_i, δ_i)``), taken back through the layout chain by its VJP."""
    view, back = jax.vjp(lambda p: apply_chain(tap.chain, p), leaf)

    def one(a_i: Array, delta_i: Array) -> Array:
        if tap.kind == "conv":
            use_grad = _conv_kernel_grad(tap.params, view.shape, a_i, delta_i).astype(view.dtype)
        else:
            _, use_back = jax.vjp(lambda w: _use(tap, a_i, w), view)
            (use_grad,) = use_back(delta_i)
        (grad,) = back(use_grad)
        return grad

    return jax.vmap(one)(a, delta)


def dense_sum(tap: Tap, leaf: Array, a: Array, weighted_delta: Array, precision: Any) -> Array:
    """``Σ_i a_i ⊗ (s_i·δ_i)`` of a dense tap, in the leaf's shape: the ``dot_general``'s own VJP
    with respect to its weight over the whole batch (one product ``aᵀ(s ⊙ δ)``), at
    ``precision``."""
    view, back = jax.vjp(lambda p: apply_chain(tap.chain, p), leaf)
    params = dict(tap.params, precision=precision)

    def batched(w: Array) -> Array:
        return jax.vmap(
            lambda a_i: jax.lax.dot_general(
                a_i,
                w,
                params["dimension_numbers"],
                precision=precision,
                preferred_element_type=params.get("preferred_element_type"),
            )
        )(a)

    _, use_back = jax.vjp(batched, view)
    (use_sum,) = use_back(weighted_delta.astype(view.dtype))
    (total,) = back(use_sum)
    return total
