"""A wrong *type* (a non-callable where a function is due, a tuple where a dataclass is due...)
raises TypeError naming the argument, before anything is computed; a wrong *value* of the right
type stays a ValueError (tested beside each function)."""

from __future__ import annotations

import pytest

from dpprep.accounting import dp
from dpprep.preprocess import Sensitivity, pipeline
from dpprep.preprocess.privacy import meta


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: dp.epsilon(1.0, 1e-5, "poisson"), "schedule must be a DpSgdSchedule"),
        (
            lambda: dp.epsilon(1.0, 1e-5, dp.DpSgdSchedule(10, "poisson", 0.1), options="pld"),
            "options must be an AccountingOptions",
        ),
        (lambda: dp.composed_epsilon([1.0], 1e-5), "events must contain dp_accounting DpEvents"),
        (lambda: dp.composed_calibrate(1.0, 1.0, 1e-5), "make_event must be callable"),
        (
            lambda: meta.calibrate_mechanism(
                1.0, Sensitivity(0.0, 0.0), target_epsilon=1.0, delta=1e-5
            ),
            "mechanism_factory must be callable",
        ),
        (
            lambda: meta.PreprocessedAccountant((1.0, 0.1)),
            "sensitivity must be a dpprep.preprocess.Sensitivity",
        ),
        (lambda: pipeline.Step("impute", fn=1.0), "fn must be callable"),
        (lambda: pipeline.Pipeline((lambda x: x,)), "steps must contain Step objects"),
    ],
)
def test_a_wrong_type_raises_type_error(call, match):
    with pytest.raises(TypeError, match=match):
        call()
