"""Files the library writes or reads its own code from: atomic writes honouring the umask, and a
digest of source files (which keys caches on the code that computes their values, not on
its documentation).

Experiment infrastructure (the results store, progress, comparisons) lives outside the library,
in :mod:`experiments.results`.
"""

from __future__ import annotations

import ast
import hashlib
import os
import re
import tempfile
from pathlib import Path
from typing import Iterable


def code_text(source: bytes) -> bytes:
    r"""What a Python file computes, as bytes: its syntax tree with docstrings dropped and without
    positions, so that rewording a docstring, editing a comment or re-wrapping lines leaves it
    unchanged while any edit to code (a constant, a name, an import) changes it. A file that does
    not parse is taken as its raw bytes.

    >>> code_text(b"'Doc.'\nX = 1  # why\n") == code_text(b"X = (\n    1\n)\n")
    True
    >>> code_text(b"X = 1\n") == code_text(b"X = 2\n")
    False
    """
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return source
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if (
                body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                # A body cannot be empty: a docstring-only body becomes ``pass`` (same behaviour).
                node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree, annotate_fields=True, include_attributes=False).encode()


def tree_digest(root: Path | str, sources: Iterable[str]) -> str:
    """sha256 over the ``.py`` files of ``sources`` under ``root`` (each a file, or a folder
    searched
    recursively; missing ones skipped): relative path and :func:`code_text` only (no absolute
    paths, mtimes, docstrings, comments or layout), so a fresh clone of the same commit gets the
    same digest and a documentation edit keeps cached results valid."""
    root = Path(root)
    files = sorted(
        (path.relative_to(root).as_posix(), path)
        for source in sources
        for path in (
            (root / source).rglob("*.py")
            if (root / source).is_dir()
            else [root / source]
            if (root / source).is_file()
            else []
        )
    )
    digest = hashlib.sha256()
    for relpath, path in files:
        for part in (relpath.encode(), code_text(path.read_bytes())):
            digest.update(len(part).to_bytes(8, "little") + part)  # length-prefixed: no ambiguity
    return digest.hexdigest()[:16]


def umask_mode() -> int:
    """The mode a plain ``open()`` would give a new file now (0o666 less the current umask).
    Read from /proc where it exists: ``os.umask`` can only read the mask by setting it, which
    would briefly give other threads' files a mask of 0."""
    try:
        status = Path("/proc/self/status").read_text()
        # no match: TypeError, caught
        mask = int(re.search(r"^Umask:\s*([0-7]+)", status, re.M)[1], 8)  # type: ignore[index]
    except (OSError, TypeError):
        mask = os.umask(0)
        os.umask(mask)
    return 0o666 & ~mask


def atomic_write_bytes(path: Path | str, data: bytes) -> None:
    """Writes ``data`` to ``path`` via a temporary file and ``os.replace`` (never half-written)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, umask_mode())  # mkstemp creates 0600; outputs are meant to be shared
        os.replace(tmp, path)
    except BaseException as err:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(err, OSError) and err.filename is None:
            err.filename = str(path)  # a failed write (e.g. a full disk) names no file by itself
        raise


def atomic_write_text(path: Path | str, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))
