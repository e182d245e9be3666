"""The privacy of pre-processed pipelines (Hu, Sanyal & Schölkopf, ICML 2024), accounted by hand
where dp-accounting has no event: Rényi divergences and the RDP-to-DP conversion they use
(:mod:`.renyi`), the RDP / Smooth RDP of Table 1's mechanisms (:mod:`.table1`), Theorem 2's overall
privacy of a mechanism run on pre-processed data and its calibration (:mod:`.meta`), Table 2
(:mod:`.table2`), subsampled DP-SGD with a rigorous replace-one RDP (:mod:`.sgd_samp`), and PTR's
Theorem 7 / Proposition 8 (:mod:`.theorem7`).

Two RDP-to-(ε, δ) conversions exist on purpose: :func:`dpprep.accounting.dp.rdp_curve_epsilon`
uses dp-accounting's tighter conversion (use it for new work), :func:`.renyi.rdp_to_dp` is Lemma M
(Mironov 2017), the one Hu et al. use, so that their numbers reproduce.
"""
