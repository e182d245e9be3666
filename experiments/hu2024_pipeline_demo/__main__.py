"""``python -m experiments.hu2024_pipeline_demo``: run this experiment alone."""

from experiments import main_for

main_for("hu2024_pipeline_demo")
