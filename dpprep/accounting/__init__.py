"""Privacy accounting.

- ``dpprep.accounting.dp``: dp-accounting wrappers for the private learners (PLD default, RDP),
  noise calibration, analytic Gaussian, composition, conversion of hand-written RDP curves.
- ``dpprep.accounting.renyi`` / ``table1`` / ``meta``: Hu et al. (2024) Smooth-RDP accounting of
  pre-processed pipelines.
"""
