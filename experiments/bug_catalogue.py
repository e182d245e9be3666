"""The catalogue of planted privacy bugs that dpprep's audit is tested against (test-only).

It lives outside the library on purpose: nothing in ``dpprep`` can switch a bug on. :func:`inject`
rebinds a library attribute (the privatizer's noise, the clip factors, the Poisson sampler, the
engine's step, DPSGD-F's private mean, CorrDP's noise factors) for the duration of a ``with``
block — never the audit's bookkeeping: the accountant, the canary and the attack stay honest —
and :func:`audit_with_bug` audits a learner under it. JAX's compilation caches and dpprep's own
are cleared on entry and on exit, so a function compiled inside the block never runs after it
(and one compiled before it is traced afresh inside), whatever caches its config hits.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, Callable, Iterator

import jax
import jax.numpy as jnp
import numpy as np

from dpprep.auditing import AuditConfig, AuditResult, audit

@dataclasses.dataclass(frozen=True)
class Bug:
    """A class of privacy bug that :func:`inject` plants in dpprep's own code (never in the
    audit's bookkeeping: the accountant, the canary and the attack stay honest).

    Attributes:
      description: what the broken code does.
      patches: ``(module, attribute, wrap)`` triples: while injected, ``module.attribute`` is
        ``wrap(original)``. Library code looks these names up when the audit traces the learner,
        so every learner built and compiled inside :func:`inject` runs the broken code.
      learners: dpprep learners whose code path the patch reaches.
    """

    description: str
    patches: tuple[tuple[str, str, Callable[[Callable], Callable]], ...]
    learners: tuple[str, ...]


def _scaled_noise(factor: float) -> Callable[[Callable], Callable]:
    def wrap(add_noise):
        def broken(key, grad_sum, noise_multiplier, clip_norm, scales=None, stddev=0.0):
            return add_noise(key, grad_sum, noise_multiplier * factor, clip_norm, scales, stddev * factor)
        return broken
    return wrap


def _clip_to(multiple: float) -> Callable[[Callable], Callable]:
    def wrap(clip_factors):
        return lambda norms, clip_norm, mask: clip_factors(norms, clip_norm * multiple, mask)
    return wrap


def _last_row_unclipped(clip_factors: Callable) -> Callable:
    # An off-by-one in a clipping loop over the batch's *real* rows (``for i in range(size - 1)``):
    # the last row the mask keeps retains its full gradient. Padding slots (mask 0) are skipped,
    # as a loop over the realised batch would: Poisson batches are padded at the end, so the
    # last slot is padding, not the canary. The audits append the canary as the last record, and
    # the Poisson sampler lists selected indices in order, so whenever the canary is sampled it is
    # this row (full batch: always; shuffled: only when shuffled last, 1 in B per epoch — the bug's
    # real reach there).
    def broken(norms, clip_norm, mask):
        scale = clip_factors(norms, clip_norm, mask)
        if mask is None:
            return scale.at[-1].set(1.0)
        kept = mask > 0
        last = kept.shape[-1] - 1 - jnp.argmax(kept[::-1])  # last real row (0 if none: mask 0 keeps it out)
        return scale.at[last].set(mask[last])
    return broken


def _doubled_batch_rate(poisson_batch: Callable) -> Callable:
    return lambda key, n, q, pad: poisson_batch(key, n, min(1.0, 2.0 * q), pad)


def _doubled_pad_rate(poisson_pad_size: Callable) -> Callable:
    # The pad grows with the rate, so the larger batches are not truncated (which would drop the
    # canary, the last record, and hide the bug behind an unrelated one).
    return lambda n, q, steps=1, **kwargs: poisson_pad_size(n, min(1.0, 2.0 * q), steps, **kwargs)


def _twice(apply_step: Callable) -> Callable:
    # Each accounted step runs the private update twice (a retried step, fresh noise each time).
    def broken(params, opt_state, batch, *, grad_fn, tx, mask=None):
        params, opt_state, _ = apply_step(params, opt_state, batch, grad_fn=grad_fn, tx=tx, mask=mask)
        return apply_step(params, opt_state, batch, grad_fn=grad_fn, tx=tx, mask=mask)
    return broken


def _noiseless_mean(mean_from_parts: Callable) -> Callable:
    return lambda unit_mean, n, feature_norm, noise_std_unit, xi: mean_from_parts(unit_mean, n, feature_norm, 0.0, xi)


def _halved_factors(corrdp_factors: Callable) -> Callable:
    def broken(m, sensitive, tv, **kwargs):
        factors = np.array(corrdp_factors(m, sensitive, tv, **kwargs), np.float64)
        insensitive = np.setdiff1d(np.arange(m), np.asarray(list(sensitive), int))
        factors[insensitive] *= 0.5
        return factors
    return broken


_GAUSSIAN_NOISE_LEARNERS = ("dp_gd", "dp_sgd_poisson", "dp_sgd_shuffle", "dp_sgd_iteration", "dpsgdf", "corrdp_sgd",
                            "impute_dp_gd")

#: The catalogue of issue 19 by name (:func:`inject`).
BUGS: dict[str, Bug] = {
    "noise_0.7x": Bug("the Gaussian noise is 0.7× the std the accountant assumes (dpprep.noise.add_noise)",
                      (("dpprep.noise", "add_noise", _scaled_noise(0.7)),), _GAUSSIAN_NOISE_LEARNERS),
    "clip_2c": Bug("per-example gradients are clipped to 2C instead of C (dpprep.clipping.clip_factors)",
                   (("dpprep.clipping", "clip_factors", _clip_to(2.0)),), _GAUSSIAN_NOISE_LEARNERS),
    "one_unclipped": Bug("the last real example (per the mask) of each batch is not clipped (dpprep.clipping.clip_factors)",
                         (("dpprep.clipping", "clip_factors", _last_row_unclipped),), _GAUSSIAN_NOISE_LEARNERS),
    "poisson_2q": Bug("the Poisson sampler includes each record at rate 2q, the accountant charges q "
                      "(dpprep.sampling.poisson_batch, poisson_pad_size)",
                      (("dpprep.sampling", "poisson_batch", _doubled_batch_rate),
                       ("dpprep.sampling", "poisson_pad_size", _doubled_pad_rate)), ("dp_sgd_poisson", "dpsgdf")),
    "double_releases": Bug("every accounted step releases two noisy updates (dpprep.algorithms' apply_step runs twice)",
                           (("dpprep.algorithms", "apply_step", _twice),), _GAUSSIAN_NOISE_LEARNERS),
    "mean_noiseless": Bug("DPSGD-F's private mean is released without its noise (dpprep.dpsgdf.mean_from_parts)",
                          (("dpprep.dpsgdf", "mean_from_parts", _noiseless_mean),), ("dpsgdf",)),
    "corrdp_factors_halved": Bug("CorrDP's insensitive-feature noise variance factors are halved "
                                 "(dpprep.corrdp.noise.corrdp_factors)",
                                 (("dpprep.corrdp.noise", "corrdp_factors", _halved_factors),), ("corrdp_sgd",)),
}


def check_bug(name: str) -> Bug:
    """The catalogue entry ``name``; ValueError naming the available ones otherwise."""
    if not isinstance(name, str) or name not in BUGS:
        raise ValueError(f"unknown bug {name!r}; available: {', '.join(BUGS)}")
    return BUGS[name]


def clear_compilations() -> None:
    """Forget every compiled function: JAX's caches and the engine's (the sweeps' compiled calls)."""
    from dpprep import algorithms, sweeps

    sweeps._compiled_group.cache_clear()
    sweeps._compiled_datasets.cache_clear()
    algorithms._host_fns.cache_clear()
    jax.clear_caches()


@contextlib.contextmanager
def inject(name: str) -> Iterator[Bug]:
    """Test-only: plants bug ``name`` (:data:`BUGS`) in dpprep's library code for the duration of
    the block; every learner traced inside it runs the broken code (compilations are cleared on
    entry and exit, so none leaks in or out). Not thread-safe: the patch is a module attribute.
    Restores the originals on exit, also on error::

        with inject("clip_2c"):
            result = audit(AuditConfig("dp_gd", epsilon=1.0))
        result.violation  # True: a rigorous bound above the accounted ε
    """
    import importlib

    bug = check_bug(name)
    saved: list[tuple[Any, str, Any]] = []
    clear_compilations()
    try:
        for module_name, attribute, wrap in bug.patches:
            module = importlib.import_module(module_name)
            original = getattr(module, attribute)
            saved.append((module, attribute, original))
            setattr(module, attribute, wrap(original))
        yield bug
    finally:
        for module, attribute, original in reversed(saved):
            setattr(module, attribute, original)
        clear_compilations()


def audit_with_bug(bug: str | None, cfg: AuditConfig, **kwargs: Any) -> AuditResult:
    """:func:`audit` of ``cfg`` with catalogue bug ``bug`` injected (None: the honest learner). A
    bug whose patches do not reach ``cfg.learner`` is refused (its audit would be an honest one)."""
    if bug is None:
        return audit(cfg, **kwargs)
    entry = check_bug(bug)
    if cfg.learner not in entry.learners:
        raise ValueError(f"bug {bug!r} does not reach learner {cfg.learner!r}; it reaches {', '.join(entry.learners)}")
    with inject(bug):
        return audit(cfg, **kwargs)


__all__ = ["BUGS", "Bug", "audit_with_bug", "check_bug", "clear_compilations", "inject"]
