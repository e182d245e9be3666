"""Argument checks shared by every public entry point.

Each check raises ``ValueError`` naming the offending argument, and runs on host values before any
JAX compilation so that a bad call fails fast and clearly.
"""

from __future__ import annotations

import functools
import math
import sys
import weakref
from typing import TYPE_CHECKING, Any, Callable

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    import jax


def check_epsilon(epsilon: float, name: str = "epsilon") -> float:
    epsilon = float(epsilon)
    if not math.isfinite(epsilon) or epsilon <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {epsilon!r}")
    return epsilon


def check_delta(delta: float, name: str = "delta") -> float:
    delta = float(delta)
    if not (0.0 < delta < 1.0):
        raise ValueError(f"{name} must lie in the open interval (0, 1), got {delta!r}")
    return delta


def check_positive(value: float, name: str, *, allow_zero: bool = False) -> float:
    value = float(value)
    ok = value >= 0 if allow_zero else value > 0
    if not math.isfinite(value) or not ok:
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be a finite number {bound}, got {value!r}")
    return value


def check_probability(value: float, name: str, *, allow_zero: bool = False) -> float:
    """Checks ``value`` in (0, 1] (or [0, 1] with ``allow_zero``)."""
    value = float(value)
    lo_ok = value >= 0 if allow_zero else value > 0
    if not (math.isfinite(value) and lo_ok and value <= 1):
        interval = "[0, 1]" if allow_zero else "(0, 1]"
        raise ValueError(f"{name} must lie in {interval}, got {value!r}")
    return value


def check_positive_int(value: float, name: str, *, minimum: int = 1) -> int:
    try:
        whole = int(value)
    except TypeError:  # None, a list: a wrong type
        raise TypeError(
            f"{name} must be an integer >= {minimum}, got {type(value).__name__}"
        ) from None
    except (ValueError, OverflowError):  # NaN, inf, text: a wrong value, named
        whole = None
    if isinstance(value, bool) or whole is None or whole != value or whole < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return whole


def check_finite_array(
    array: npt.ArrayLike, name: str, *, ndim: int | None = None, float32: bool = False
) -> np.ndarray:
    """Returns ``array`` as numpy after checking it is numeric (bool, integer or float: an object
    array, e.g. ``DataFrame.to_numpy()`` of mixed columns, is refused), finite, of rank ``ndim``
    if given, and with ``float32`` within float32's range (so the engine's cast cannot make inf)."""
    return np.asarray(check_finite_values(array, name, ndim=ndim, float32=float32))


def check_finite_values(
    array: npt.ArrayLike | jax.Array,
    name: str,
    *,
    ndim: int | None = None,
    float32: bool = False,
) -> np.ndarray | jax.Array:
    """The checks of :func:`check_finite_array`, for data sets: a ``jax.Array`` comes back as itself
    (it stays on its device) and is scanned once, whatever the number of calls it is passed to
    (``train`` in a loop, one sweep per grid point): a JAX array cannot change, so its verdict is
    kept for as long as the array lives. Anything else (a numpy array may be written to between
    two calls) is converted to numpy and scanned at every call. (A JAX array made to share a numpy
    array's memory, ``jax.device_put(x, may_alias=True)`` or ``jnp.from_dlpack``, changes when
    that numpy array is written to, unseen by this check; no guarantee rests on it: an example
    whose gradient is not finite contributes nothing, :func:`dpprep.clipping.nan_safe`.)"""
    if _is_device_array(array):
        arr: Any = array
    else:
        try:
            arr = np.asarray(array)
        except ValueError as err:  # ragged nested sequences
            raise ValueError(f"{name} must be a numeric array: {err}") from err
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimension(s), got shape {arr.shape}")
    if np.dtype(arr.dtype).kind not in "biufc":
        raise ValueError(
            f"{name} must be numeric, got dtype {arr.dtype} (convert it, e.g. "
            "np.asarray(values, dtype=np.float32), after handling missing or text values)"
        )
    if not arr.size or np.dtype(arr.dtype).kind in "biu":
        # no integer exceeds float32's range (2**64 < 3.4e38): nothing to scan
        return arr
    lo, hi = _extremes(arr)
    # NaN propagates through the smallest and the largest value and ±inf shows, so they are finite
    # exactly when every value is (complex values: the extremes of |value|)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        host = np.asarray(arr)
        bad = int(np.size(host) - np.count_nonzero(np.isfinite(host)))
        raise ValueError(f"{name} contains {bad} non-finite value(s) (NaN or inf)")
    if float32 and max(-lo, hi) > float(np.finfo(np.float32).max):
        raise ValueError(
            f"{name} has values beyond float32's range (max |value| = {max(-lo, hi):.3g}); the "
            "engine computes in float32: rescale the data"
        )
    return arr


def _is_device_array(array: Any) -> bool:
    """A concrete ``jax.Array`` (not a tracer), without importing JAX for numpy callers."""
    jax_module = sys.modules.get("jax")
    return (
        jax_module is not None
        and isinstance(array, jax_module.Array)
        and not isinstance(array, jax_module.core.Tracer)
    )


# id of a jax.Array -> (a weak reference to it, its smallest and largest value): the scan of a
# data set that cannot change is done once, not at every call it is passed to
_EXTREMES: dict[int, tuple[weakref.ref[Any], float, float]] = {}


def _extremes(arr: Any) -> tuple[float, float]:
    """The smallest and largest value of a float array (of ``|value|`` for complex ones), in one
    reduction each and without a temporary the size of the data (train and the sweeps call this);
    a ``jax.Array``'s are computed on its device and kept while it lives."""
    if not _is_device_array(arr):
        if np.iscomplexobj(arr):
            mag = np.abs(arr)
            return float(np.min(mag)), float(np.max(mag))
        return float(np.min(arr)), float(np.max(arr))
    key = id(arr)
    hit = _EXTREMES.get(key)
    if hit is not None and hit[0]() is arr:
        return hit[1], hit[2]
    import jax.numpy as jnp

    values = jnp.abs(arr) if jnp.iscomplexobj(arr) else arr
    lo, hi = float(jnp.min(values)), float(jnp.max(values))

    def forget(ref: weakref.ref[Any], key: int = key) -> None:
        if _EXTREMES.get(key, (None,))[0] is ref:
            del _EXTREMES[key]

    try:
        _EXTREMES[key] = (weakref.ref(arr, forget), lo, hi)
    except TypeError:  # not weakly referenceable: scanned at every call
        pass
    return lo, hi


def check_same_length(a: npt.ArrayLike, b: npt.ArrayLike, name_a: str, name_b: str) -> None:
    if np.shape(a)[0] != np.shape(b)[0]:
        raise ValueError(
            f"{name_a} and {name_b} must have the same number of rows, got "
            f"{np.shape(a)[0]} and {np.shape(b)[0]}"
        )


def check_key(key: Any, name: str = "key", *, stacked: bool = False) -> jax.Array:
    """Host-side check that ``key`` is a PRNG key (``jax.random.key`` or ``jax.random.PRNGKey``),
    or with ``stacked`` a 1-D stack of them (``jax.random.split``); TypeError naming it otherwise.
    """
    import jax  # here: the rest of this module runs without JAX
    import jax.numpy as jnp

    dtype = getattr(key, "dtype", None)
    if dtype is not None and jnp.issubdtype(dtype, jax.dtypes.prng_key):
        ok = np.ndim(key) == int(stacked)
    else:
        ok = dtype == np.uint32 and np.ndim(key) == 1 + int(stacked) and np.shape(key)[-1] == 2
    if not ok:
        what = "a stack of PRNG keys (jax.random.split)" if stacked else "a PRNG key"
        raise TypeError(
            f"{name} must be {what}, e.g. from jax.random.key(seed), got "
            f"{type(key).__name__} of shape {np.shape(key)} and dtype {dtype}"
        )
    return jnp.asarray(key)


def check_float_params(params: Any, name: str = "params") -> None:
    """Host-side check that every leaf of the parameter pytree ``params`` is floating point: an
    integer (or bool, complex, key) parameter has no real gradient, so JAX would fail deep inside
    the compiled step, or a fast path would leave it silently unchanged; TypeError naming the
    leaf."""
    import jax  # here: the rest of this module runs without JAX
    import jax.numpy as jnp

    for path, leaf in jax.tree_util.tree_leaves_with_path(params):
        dtype = getattr(leaf, "dtype", None)
        dtype = np.result_type(leaf) if dtype is None else dtype
        if not jnp.issubdtype(dtype, jnp.floating):
            raise TypeError(
                f"{name}{jax.tree_util.keystr(path)} has dtype {dtype}: parameters must be floating"
                " point (an integer has no gradient); cast them, e.g. jax.tree_util.tree_map("
                f"lambda a: a.astype(jnp.float32), {name})"
            )


# grad_fn -> the signatures (tree structure, shapes, dtypes) its loss was checked on: a loop of
# steps traces the check once, not at every step
_CHECKED: weakref.WeakKeyDictionary[Any, set[Any]] = weakref.WeakKeyDictionary()


def check_step_fits(
    grad_fn: Any, step_fn: Callable[..., Any], params: Any, batch: Any, mask: Any, args: Any
) -> None:
    """Host-side checks of one step's loss before it is compiled or run: ``params`` are floating
    point (:func:`check_float_params`), and ``step_fn(params, batch, *args, mask=mask)`` (the
    clipped sum of ``grad_fn``'s loss) traces on their shapes, evaluated abstractly with
    ``jax.eval_shape`` (nothing computed; once per ``grad_fn`` and shapes). A failure, e.g. params
    of 4 features on data of 3, is a ValueError naming the params' and one example's shapes."""
    import jax

    check_float_params(params, "params")
    leaves, treedef = jax.tree_util.tree_flatten((params, batch, mask, args))
    signature = (
        treedef,
        tuple((np.shape(leaf), str(getattr(leaf, "dtype", type(leaf)))) for leaf in leaves),
    )
    try:
        seen = _CHECKED.setdefault(grad_fn, set())
    except TypeError:  # not weakly referenceable: check every time
        seen = set()
    if signature in seen:
        return
    # arrays (and tracers, under jit) abstract; anything else (e.g. a Python scalar or a string
    # the loss reads) passed as it is, as the step itself will pass it
    arrays = [i for i, leaf in enumerate(leaves) if hasattr(leaf, "dtype")]

    def traced(*values: Any) -> Any:
        filled = list(leaves)
        for i, value in zip(arrays, values):
            filled[i] = value
        p, b, m, a = jax.tree_util.tree_unflatten(treedef, filled)
        return step_fn(p, b, *a, mask=m)

    try:
        jax.eval_shape(
            traced, *(jax.ShapeDtypeStruct(np.shape(leaves[i]), leaves[i].dtype) for i in arrays)
        )
    except Exception as err:  # any tracing error of user code: say what it was given
        shapes = functools.partial(jax.tree_util.tree_map, lambda leaf: tuple(np.shape(leaf)))
        example = jax.tree_util.tree_map(lambda leaf: tuple(np.shape(leaf)[1:]), batch)
        raise ValueError(
            f"the loss cannot be evaluated on this data with these params (params' shapes "
            f"{shapes(params)}, one example's shapes {example}"
            + (f", other arguments' shapes {shapes(args)}" if args else "")
            + f"): {type(err).__name__}: {err}"
        ) from err
    seen.add(signature)
