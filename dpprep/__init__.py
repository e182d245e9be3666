"""dpprep: differentially private learning where pre-processing is part of the privacy story."""

__version__ = "0.1.0"
