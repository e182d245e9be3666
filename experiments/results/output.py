"""Writing tables and figures atomically, so an interrupted run never leaves a half-written file."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

from dpprep.files import (
    atomic_write_bytes,  # noqa: F401 (re-exported)
    atomic_write_text,
    umask_mode,
)


def write_csv(frame: pd.DataFrame, path: Path | str) -> None:
    atomic_write_text(path, frame.to_csv(index=False))


def save_figure(fig: Any, path: Path | str, **kwargs: Any) -> None:
    """Saves a matplotlib figure atomically (PNG by the path's suffix)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=path.suffix)
    os.close(fd)
    try:
        fig.savefig(tmp, **({"dpi": 130, "bbox_inches": "tight"} | kwargs))
        os.chmod(tmp, umask_mode())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
