"""Privacy accounting.

- ``dpprep.accounting.dp``: dp-accounting wrappers for the private learners (PLD default, RDP),
  noise calibration, analytic Gaussian, composition, conversion of hand-written RDP curves.
- ``dpprep.accounting.renyi`` / ``table1`` / ``meta``: Hu et al. (2024) Smooth-RDP accounting of
  pre-processed pipelines.
"""

from dpprep.accounting.dp import (
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
