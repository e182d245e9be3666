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
import optax

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
            return add_noise(
                key, grad_sum, noise_multiplier * factor, clip_norm, scales, stddev * factor
            )

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
        # last real row (0 if none: mask 0 keeps it out)
        last = kept.shape[-1] - 1 - jnp.argmax(kept[::-1])
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
        params, opt_state, _ = apply_step(
            params, opt_state, batch, grad_fn=grad_fn, tx=tx, mask=mask
        )
        return apply_step(params, opt_state, batch, grad_fn=grad_fn, tx=tx, mask=mask)

    return broken


def _noiseless_mean(mean_from_parts: Callable) -> Callable:
    return lambda unit_mean, n, feature_norm, noise_std_unit, xi: mean_from_parts(
        unit_mean, n, feature_norm, 0.0, xi
    )


def _calibrated_low(calibrate: Callable) -> Callable:
    # The plan's calibration returns 0.7x the multiplier its own accountant needs (a wrong bracket,
    # a units slip): the plan then runs, and reports the ε of, that noise.
    return lambda spec, target: 0.7 * calibrate(spec, target)


def _half_steps_charged(dpsgd_event: Callable) -> Callable:
    # The accountant's event composes half the steps the run takes (an off-by-epochs slip): the
    # plan calibrates to, and reports, the ε of half its run — consistently, so the plan agrees
    # with itself.
    def broken(noise_multiplier, schedule):
        return dpsgd_event(
            noise_multiplier, dataclasses.replace(schedule, steps=max(1, schedule.steps // 2))
        )

    return broken


def _frozen_noise_key(privatizer: Callable) -> Callable:
    # The privatizer's step counter is not advanced into the key: every step of a run adds the
    # same noise draw (fresh per run), which cancels in the difference of two updates.
    def broken(*args, **kwargs):
        tx = privatizer(*args, **kwargs)

        def update(updates, state, params=None):
            out, new_state = tx.update(
                updates, state._replace(count=jnp.zeros_like(state.count)), params
            )
            return out, new_state._replace(count=state.count + 1)

        return optax.GradientTransformation(tx.init, update)

    return broken


def _batch_max_scaling(clip_factors: Callable) -> Callable:
    # "Clipping" that scales the whole batch by C over its largest norm: a lone gradient of norm
    # 4C becomes C exactly as per-example clipping makes it, but every other record of that batch
    # shrinks too, so the canary's presence moves the other records' contributions.
    def broken(norms, clip_norm, mask):
        real = jnp.ones_like(norms) if mask is None else mask
        worst = jnp.max(jnp.where(real > 0, norms, 0.0))
        return jnp.minimum(1.0, clip_norm / jnp.maximum(worst, 1e-30)) * real

    return broken


def _padding_slots_real(poisson_batch: Callable) -> Callable:
    # The padded slots (index 0) are kept with weight 1 instead of 0: record 0 enters every
    # Poisson batch once per unused slot.
    def broken(key, n, q, pad):
        indices, mask, size, overflow = poisson_batch(key, n, q, pad)
        return indices, jnp.ones_like(mask), size, overflow

    return broken


def _first_record_always(poisson_batch: Callable) -> Callable:
    # Record 0 is put in every batch that misses it (a seed slot that is never re-drawn).
    def broken(key, n, q, pad):
        indices, mask, size, overflow = poisson_batch(key, n, q, pad)
        present = jnp.any((indices == 0) & (mask > 0))
        slot = jnp.minimum(size, pad - 1)
        add = ~present & (size < pad)
        indices = jnp.where(add, indices.at[slot].set(0), indices)
        mask = jnp.where(add, mask.at[slot].set(1.0), mask)
        return indices, mask, size + add.astype(size.dtype), overflow

    return broken


def _per_leaf_norms(global_norms: Callable) -> Callable:
    # The clipping norm of a multi-leaf gradient is its largest leaf's norm, not the norm over all
    # leaves: each leaf is held to C on its own, the whole gradient to C·sqrt(leaves).
    def broken(tree):
        leaves = [g.reshape(g.shape[0], -1) for g in jax.tree_util.tree_leaves(tree)]
        return jnp.max(
            jnp.stack([jnp.sqrt(jnp.sum(jnp.square(g), axis=1)) for g in leaves]), axis=0
        )

    return broken


def _halved_sensitive(corrdp_factors: Callable) -> Callable:
    def broken(m, sensitive, tv, **kwargs):
        factors = np.array(corrdp_factors(m, sensitive, tv, **kwargs), np.float64)
        factors[np.asarray(list(sensitive), int)] *= 0.5
        return factors

    return broken


def _mean_sigma_halved(mean_sigma: Callable) -> Callable:
    # A factor-two slip in σ_F (e.g. a replace-one sensitivity divided out twice): the mean is
    # released with half its noise, and the run's multiplier is calibrated around that noise, so
    # the plan agrees with itself.
    return lambda eps_f, delta: 0.5 * mean_sigma(eps_f, delta)


def _halved_factors(corrdp_factors: Callable) -> Callable:
    def broken(m, sensitive, tv, **kwargs):
        factors = np.array(corrdp_factors(m, sensitive, tv, **kwargs), np.float64)
        insensitive = np.setdiff1d(np.arange(m), np.asarray(list(sensitive), int))
        factors[insensitive] *= 0.5
        return factors

    return broken


_PATHS = ("dp_sgd_poisson_vmap_clip", "dp_sgd_poisson_sweep_point", "dpsgdf_grid")
_GAUSSIAN_NOISE_LEARNERS = (
    "dp_gd",
    "dp_sgd_poisson",
    "dp_sgd_shuffle",
    "dp_sgd_iteration",
    "dpsgdf",
    "corrdp_sgd",
    "corrdp_sgd_sensitive",
    "impute_dp_gd",
) + _PATHS
#: Learners whose noise the plan calibrates (through dpprep.plan and the DP-SGD event).
_PLAN_CALIBRATED = (
    "dp_gd",
    "dp_sgd_poisson",
    "dp_sgd_shuffle",
    "dp_sgd_iteration",
    "dpsgdf",
) + _PATHS
_POISSON = ("dp_sgd_poisson", "dpsgdf") + _PATHS
_DPSGDF = ("dpsgdf", "dpsgdf_grid")

#: The catalogue of issue 19 by name (:func:`inject`).
BUGS: dict[str, Bug] = {
    "noise_0.7x": Bug(
        "the Gaussian noise is 0.7× the std the accountant assumes (dpprep.noise.add_noise)",
        (("dpprep.noise", "add_noise", _scaled_noise(0.7)),),
        _GAUSSIAN_NOISE_LEARNERS,
    ),
    "clip_2c": Bug(
        "per-example gradients are clipped to 2C instead of C (dpprep.clipping.clip_factors)",
        (("dpprep.clipping", "clip_factors", _clip_to(2.0)),),
        _GAUSSIAN_NOISE_LEARNERS,
    ),
    "one_unclipped": Bug(
        "the last real example (per the mask) of each batch is not clipped"
        " (dpprep.clipping.clip_factors)",
        (("dpprep.clipping", "clip_factors", _last_row_unclipped),),
        _GAUSSIAN_NOISE_LEARNERS,
    ),
    "calibration_0.7x": Bug(
        "the plan's calibration returns 0.7x the multiplier its accountant needs"
        " (dpprep.plan._calibrate)",
        (("dpprep.plan", "_calibrate", _calibrated_low),),
        _PLAN_CALIBRATED,
    ),
    "half_steps_charged": Bug(
        "the accountant's DP-SGD event composes half the steps the run takes "
        "(dpprep.accounting.dp.dpsgd_event)",
        (("dpprep.accounting.dp", "dpsgd_event", _half_steps_charged),),
        tuple(name for name in _PLAN_CALIBRATED if name != "dp_sgd_iteration"),
    ),
    "noise_key_frozen": Bug(
        "every step of a run draws the same noise (the privatizer's counter does not reach its "
        "key; dpprep.noise.privatizer)",
        (("dpprep.noise", "privatizer", _frozen_noise_key),),
        ("dp_gd", "dp_sgd_poisson", "dp_sgd_shuffle", "dp_sgd_iteration", "dpsgdf") + _PATHS,
    ),
    "batch_max_scaling": Bug(
        "a batch is scaled by C over its largest gradient norm instead of clipping each example "
        "(dpprep.clipping.clip_factors)",
        (("dpprep.clipping", "clip_factors", _batch_max_scaling),),
        _GAUSSIAN_NOISE_LEARNERS,
    ),
    "padding_slots_real": Bug(
        "the padded slots of a Poisson batch (index 0) keep weight 1"
        " (dpprep.sampling.poisson_batch)",
        (("dpprep.sampling", "poisson_batch", _padding_slots_real),),
        _POISSON,
    ),
    "first_record_always": Bug(
        "record 0 joins every Poisson batch that missed it (dpprep.sampling.poisson_batch)",
        (("dpprep.sampling", "poisson_batch", _first_record_always),),
        _POISSON,
    ),
    "per_leaf_norms": Bug(
        "the clipping norm of a multi-leaf gradient is its largest leaf's"
        " (dpprep.clipping._global_norms)",
        (("dpprep.clipping", "_global_norms", _per_leaf_norms),),
        ("dp_sgd_poisson_vmap_clip",),
    ),
    "poisson_2q": Bug(
        "the Poisson sampler includes each record at rate 2q, the accountant charges q "
        "(dpprep.sampling.poisson_batch, poisson_pad_size)",
        (
            ("dpprep.sampling", "poisson_batch", _doubled_batch_rate),
            ("dpprep.sampling", "poisson_pad_size", _doubled_pad_rate),
        ),
        _POISSON,
    ),
    "double_releases": Bug(
        "every accounted step releases two noisy updates (dpprep.algorithms' apply_step runs"
        " twice)",
        (("dpprep.algorithms", "apply_step", _twice),),
        _GAUSSIAN_NOISE_LEARNERS,
    ),
    "mean_noiseless": Bug(
        "DPSGD-F's private mean is released without its noise (dpprep.dpsgdf.mean_from_parts)",
        (("dpprep.dpsgdf", "mean_from_parts", _noiseless_mean),),
        _DPSGDF,
    ),
    "mean_sigma_halved": Bug(
        "DPSGD-F's private-mean multiplier σ_F is half what (ε_F, δ) needs, and the run is "
        "calibrated around it (dpprep.dpsgdf.mean_sigma)",
        (("dpprep.dpsgdf", "mean_sigma", _mean_sigma_halved),),
        _DPSGDF,
    ),
    "corrdp_factors_halved": Bug(
        "CorrDP's insensitive-feature noise variance factors are halved "
        "(dpprep.corrdp.noise.corrdp_factors)",
        (("dpprep.corrdp.noise", "corrdp_factors", _halved_factors),),
        ("corrdp_sgd", "corrdp_sgd_sensitive"),
    ),
    "corrdp_sensitive_factors_halved": Bug(
        "CorrDP's sensitive-feature noise variance factors are halved "
        "(dpprep.corrdp.noise.corrdp_factors)",
        (("dpprep.corrdp.noise", "corrdp_factors", _halved_sensitive),),
        ("corrdp_sgd", "corrdp_sgd_sensitive"),
    ),
}


def check_bug(name: str) -> Bug:
    """The catalogue entry ``name``; ValueError naming the available ones otherwise."""
    if not isinstance(name, str) or name not in BUGS:
        raise ValueError(f"unknown bug {name!r}; available: {', '.join(BUGS)}")
    return BUGS[name]


def clear_compilations() -> None:
    """Forget every compiled function and cached account: JAX's caches, the engine's (the sweeps'
    compiled calls) and the plan's accountant's."""
    from dpprep import algorithms, plan, sweeps
    from dpprep.accounting import dp

    sweeps._compiled_group.cache_clear()
    sweeps._compiled_datasets.cache_clear()
    algorithms._host_fns.cache_clear()
    # The accountant's caches too: a planted accounting bug must neither hit an honest entry nor
    # leave a broken one behind (the on-disk cache re-verifies every hit with the accountant).
    plan._account.cache_clear()
    dp._calibrate_noise_cached.cache_clear()
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

    import os

    from dpprep.accounting import dp

    bug = check_bug(name)
    saved: list[tuple[Any, str, Any]] = []
    # no broken calibration reaches the disk
    disk_cache = os.environ.pop(dp.ENV_CALIBRATION_CACHE, None)
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
        if disk_cache is not None:
            os.environ[dp.ENV_CALIBRATION_CACHE] = disk_cache
        clear_compilations()


def audit_with_bug(bug: str | None, cfg: AuditConfig, **kwargs: Any) -> AuditResult:
    """:func:`audit` of ``cfg`` with catalogue bug ``bug`` injected (None: the honest learner). A
    bug whose patches do not reach ``cfg.learner`` is refused (its audit would be an honest one)."""
    if bug is None:
        return audit(cfg, **kwargs)
    entry = check_bug(bug)
    if cfg.learner not in entry.learners:
        raise ValueError(
            f"bug {bug!r} does not reach learner {cfg.learner!r}; it reaches"
            f" {', '.join(entry.learners)}"
        )
    with inject(bug):
        return audit(cfg, **kwargs)


__all__ = ["BUGS", "Bug", "audit_with_bug", "check_bug", "clear_compilations", "inject"]
