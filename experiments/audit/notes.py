"""The measured reasons why some rows of the audit's bug catalogue cannot be caught, shown as the
REPORT row's note when the audit misses one (:mod:`experiments.audit.report`).

Report text only, never an input of a unit: the unit cache does not key on this file
(:data:`experiments.results.identity.NOT_KEYED`), so a note written after a run re-renders its
tables without recomputing any audit.
"""

from __future__ import annotations

#: Why a catalogue row is not caught, computed (how many runs it would need, and why); shown as
#: the REPORT row's note when the audit misses it.
NOT_CATCHABLE: dict[tuple[str, str], str] = {
    # The shuffled learner is held to its proven no-amplification bound (5 Gaussian releases: ε 2.25
    # at the yardstick's floor) and tested against that bound's whole PLD profile. The shuffle hides
    # which batch holds the canary, so even the broken runs stay inside that curve: their
    # (non-rigorous) GDP estimates at 20,000 runs were 1.86 (2C) and 1.54 (batch scaling) < 2.25,
    # δ excess −0.0027 (measured). A sound test cannot refute a bound the broken mechanism still
    # satisfies, at any number of runs; only the unproven as-if-Poisson number (1.0) is exceeded.
    # (0.7x noise is now caught by the noise test: its columns show the missing noise directly.)
    ("dp_sgd_shuffle", "clip_2c"): (
        "within the proven no-amplification bound the shuffled learner is held to "
        "(GDP estimate 1.86 < 2.25): not a violation of it at any number of runs"
    ),
    ("dp_sgd_shuffle", "batch_max_scaling"): (
        "within the proven no-amplification bound the shuffled learner is held "
        "to (GDP estimate 1.54 < 2.25): not a violation of it at any number of runs"
    ),
    # Final model, n = 10, z = 7.04 (the plan's at ε = 1): the margin score's in/out samples
    # (100,000 runs per world, measured) have AUROC 0.554 (0.7× noise) / 0.574 (2C), a Gaussian fit
    # μ = √2·Φ⁻¹(AUROC) = 0.19 / 0.27 (ε 0.69 / 0.99 at δ = 1e-5). At the audit's 32 thresholds
    # (pilot quantiles 1/33..32/33) the attack's best point is ε 0.31 / 0.44, at any run count
    # (Clopper–Pearson: 0.23 / 0.35). No threshold does better: the score is ±shift + √T·σ·N(0, 1)
    # with the stop T ~ Unif{1..10} unseen, and that pair's exact ε at δ = 1e-5 is 0.44 / 0.63
    # (quadrature; the whole final model's, whose 4 other coordinates hint at T: 0.49 / 0.70), so
    # the broken learners still meet ε = 1 on this pair. GDP's best point (μ_t 0.28 at the median,
    # "ε" 1.07; 1.00 at 100,000 runs) extrapolates a Gaussian curve this mixture does not have.
    ("dp_sgd_iteration", "noise_0.7x"): (
        "final model, stop unseen: the broken learner's exact ε on this pair is 0.49 < 1 "
        "(best point 0.31 at the audit's thresholds): not a violation at any number of runs"
    ),
    ("dp_sgd_iteration", "clip_2c"): (
        "final model, stop unseen: the broken learner's exact ε on this pair is 0.70 < 1 "
        "(best point 0.44 at the audit's thresholds): not a violation at any number of runs"
    ),
    # Hu et al.'s threat model bounds every record to the domain (features in [−1, 1], L = C = 1),
    # so every per-example gradient of the pipeline has norm ≤ C: clipping at 2C returns the same
    # output as at C on every in-domain dataset, so the true ε is unchanged. A canary above C is
    # outside the domain where the overall ε (Cor. 4's imputation sensitivity) is proven, so
    # exceeding it there would refute nothing.
    # Measured in the committed quick run (results/audit/audit.csv): the same
    # _microbatched code is caught through dp_step at 20,000 runs per world (trade-off, confirmed);
    # through train's 5,000 the trade-off test suspected it (excess 6e-6) but fresh runs did not
    # confirm it.
    ("train_options", "first_microbatch_twice"): (
        "too few runs: train is called once per run (5,000 per world); suspected by the"
        " trade-off test, not confirmed; the same microbatch code is caught through dp_step at"
        " 20,000"
    ),
    # The canary spans 3 leaves equally (4C/√3 each): a norm over the first two scales it by
    # C/(4C·√(2/3)), leaving a clipped norm of √1.5·C ≈ 1.22·C: a 1.22× sensitivity, at the edge
    # of what the audit resolves (DP-GD: GDP bound 1.10 > 1.01 on the first runs, not confirmed;
    # Poisson through train at 5,000 runs: not suspected).
    ("train_options", "leaves_after_two_unnormed"): (
        "a 1.22× sensitivity (the canary's third-leaf part escapes the norm: √1.5·C), below what"
        " a Poisson audit at 5,000 runs per world resolves"
    ),
    ("dp_step_full_leaves", "leaves_after_two_unnormed"): (
        "a 1.22× sensitivity (√1.5·C): suspected (GDP bound 1.10 > 1.01 and the trade-off test),"
        " not confirmed on fresh runs at 20,000 per world: at the edge of the audit's power"
    ),
    # Adam's last iterate normalises each coordinate's step by its running gradient scale, so the
    # canary moves the released model less than under SGD at the same noise: the honest audits'
    # GDP estimates (20,000 runs per world, 5 seeds) were 0.60–0.65 with Adam against 0.82–0.94
    # with SGD (dp_step_full_final). 0.7× noise lifts the estimate to 0.96 (bound 0.88) at the
    # catalogue's 20,000 runs; at 100,000 runs per world (measured, same config) the GDP bound is
    # 1.055 > 1.011, confirmed on fresh runs (1.043): a matter of runs, not of the attack.
    ("dp_step_adam_final", "noise_0.7x"): (
        "too few runs: Adam's last iterate carries less of the canary (honest GDP estimates"
        " 0.60–0.65, SGD's 0.82–0.94); at 20,000 runs per world the bound is 0.88, at 100,000"
        " (measured) 1.055 > 1.011, confirmed on fresh runs"
    ),
    ("impute_dp_gd", "clip_2c"): (
        "not a privacy bug on the pipeline's domain: every in-domain gradient is ≤ C, so "
        "clipping at 2C changes no output (a canary above C is outside Hu et al.'s threat model)"
    ),
}
