"""Privacy accounting.

- ``dpprep.accounting.dp``: dp-accounting wrappers for the private learners (PLD default, RDP),
  noise calibration, analytic Gaussian, composition, conversion of hand-written RDP curves.
- ``dpprep.accounting.renyi`` / ``table1`` / ``meta`` / ``table2`` / ``theorem7``: Hu et al. (2024)
  Smooth-RDP accounting of pre-processed pipelines (Table-1 mechanisms, Theorem 2, Eq. 43, Table 2,
  Theorem 7 / Proposition 8); ``sgd_samp``: subsampled DP-SGD with a rigorous replace-one RDP and
  SRDP for Theorem 2 (what ``meta.overall_privacy`` uses for Table 1's DP-SGD-samp).

Two RDP-to-(ε, δ) conversions exist on purpose: ``dp.rdp_curve_epsilon`` uses dp-accounting's
tighter conversion (use it for new work), ``renyi.rdp_to_dp`` is Lemma M (Mironov 2017), the one
Hu et al. use, so that their numbers reproduce.
"""

from dpprep.accounting.dp import (
    AccountingOptions,
    DpSgdSchedule,
    analytic_gaussian_epsilon,
    analytic_gaussian_sigma,
    calibrate_noise,
    composed_calibrate,
    composed_epsilon,
    dpsgd_event,
    epsilon,
    gaussian_event,
    rdp_curve_epsilon,
    sgd_iter_epsilon,
    sgd_iter_rdp,
)
