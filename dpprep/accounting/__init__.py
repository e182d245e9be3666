"""Privacy accounting with dp-accounting: the wrappers the plan and the learners use.

- :mod:`dpprep.accounting.dp`: PLD (default) and RDP accounting of the learners' events, noise
  calibration, the analytic Gaussian, composition, and the conversion of hand-written RDP curves.

The accounting writes no file. The on-disk cache of calibrations that lived here
(``dpprep.accounting.calibration_cache``) is now the experiments'
(``experiments.results.calibrations``), installed around a run with
:func:`dpprep.accounting.dp.calibration_store` and verified with
:func:`dpprep.accounting.dp.check_calibration`.

Hu et al.'s Smooth-RDP accounting of pre-processed pipelines lives with their pre-processing, in
:mod:`dpprep.preprocess.privacy` (its old names here, ``dpprep.accounting.meta`` and the like, are
aliases of those modules).
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
