"""Finding data files, checking their sha256 and downloading the missing ones into a cache.

Search order for a file ``<dataset>/<file>``: the ``data_dir`` argument, then ``$DPPREP_DATA_DIR``,
then the cache (``$DPPREP_CACHE_DIR``, default ``~/.cache/dpprep``). A file found nowhere is
downloaded from its canonical URL into the cache unless downloads are off (``download=False`` or
``DPPREP_NO_DOWNLOAD=1``). A download streams into a temporary file beside its destination, is
verified, and only then renamed into place (``os.replace``), so no half-written or unverified file
is ever left behind.

Every fetch is bounded in time (:class:`FetchBudget`): a server that sends nothing for
:data:`STALL_TIMEOUT_S` seconds (connection accepted, never answered) fails that URL, and its host
is not tried again within the same fetch (the other mirrors and sources still are); the whole
fetch (a :func:`resolve`, or one ``python -m dpprep.data fetch`` command) fails once
``$DPPREP_DOWNLOAD_DEADLINE`` seconds (default :data:`DEFAULT_DEADLINE_S`) have passed.
"""

from __future__ import annotations

import gzip
import hashlib
import http.client
import math
import os
import tempfile
import time
import urllib.error
import zipfile
import zlib
from pathlib import Path
from urllib.parse import urlsplit
from urllib.request import urlopen  # module attribute so tests can serve bytes without a network

from dpprep.data.registry import FILES, FILES_BY_PATH, FileSpec
from dpprep.files import umask_mode

ENV_DATA_DIR = "DPPREP_DATA_DIR"
ENV_CACHE_DIR = "DPPREP_CACHE_DIR"
ENV_NO_DOWNLOAD = "DPPREP_NO_DOWNLOAD"
ENV_DOWNLOAD_DEADLINE = "DPPREP_DOWNLOAD_DEADLINE"
_CHUNK = 1 << 20
# No byte for this long = a stalled server. (Before, a 60 s timeout per operation with no memory
# of stalls made `fetch mnist` wait 8 × 60 s on a server that accepts and never answers.)
STALL_TIMEOUT_S = 30.0
# Total time for one fetch: ample for every registered file (~60 MB) on a slow link, finite on a
# server that drips a byte at a time.
DEFAULT_DEADLINE_S = 600.0


class ChecksumError(ValueError):
    """A data file's sha256 differs from the registered one (corrupt, truncated or a different
    file)."""


class DataFormatError(ValueError):
    """A data file cannot be parsed as its dataset (garbage, truncated or another file read
    unverified); the message names the file."""


class DataNotFoundError(FileNotFoundError):
    """A data file is in none of the searched directories and could not be downloaded."""


def cache_dir() -> Path:
    """The download cache: ``$DPPREP_CACHE_DIR`` or ``~/.cache/dpprep``."""
    env = os.environ.get(ENV_CACHE_DIR)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "dpprep"


def search_dirs(data_dir: str | os.PathLike | None = None) -> list[tuple[Path, str]]:
    """The directories searched, in order, each with where it came from (for error messages)."""
    dirs: list[tuple[Path, str]] = []
    if data_dir is not None:
        dirs.append((Path(data_dir).expanduser(), "data_dir argument"))
    if os.environ.get(ENV_DATA_DIR):
        dirs.append((Path(os.environ[ENV_DATA_DIR]).expanduser(), f"${ENV_DATA_DIR}"))
    dirs.append((cache_dir(), f"cache (${ENV_CACHE_DIR} or ~/.cache/dpprep)"))
    return dirs


_ENV_TRUE = ("1", "true", "yes", "on")
_ENV_FALSE = ("", "0", "false", "no", "off")


def downloads_enabled(download: bool | None = None) -> bool:
    """An explicit ``download`` argument wins; otherwise ``DPPREP_NO_DOWNLOAD`` set to 1/true/yes/on
    (any case) turns downloads off, 0/false/no/off or unset leaves them on, anything else is an
    error (a typo must not silently download)."""
    if download is not None:
        return bool(download)
    raw = os.environ.get(ENV_NO_DOWNLOAD, "")
    value = raw.strip().lower()
    if value not in _ENV_TRUE + _ENV_FALSE:
        raise ValueError(
            f"{ENV_NO_DOWNLOAD}={raw!r} is not a boolean: 1/true/yes/on turns downloads off, "
            "0/false/no/off or empty leaves them on"
        )
    return value in _ENV_FALSE


def download_deadline() -> float:
    """Seconds one fetch may take: ``$DPPREP_DOWNLOAD_DEADLINE`` (a number > 0) or the default."""
    raw = os.environ.get(ENV_DOWNLOAD_DEADLINE, "").strip()
    if not raw:
        return DEFAULT_DEADLINE_S
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{ENV_DOWNLOAD_DEADLINE}={raw!r} is not a number of seconds > 0")
    return value


class FetchBudget:
    """The time left to one fetch, and the hosts that stalled during it (not tried again).

    ``deadline_s`` None reads ``$DPPREP_DOWNLOAD_DEADLINE`` (default :data:`DEFAULT_DEADLINE_S`).
    """

    def __init__(self, deadline_s: float | None = None, stall_timeout_s: float | None = None):
        self.total_s = download_deadline() if deadline_s is None else float(deadline_s)
        self.stall_timeout_s = (
            STALL_TIMEOUT_S if stall_timeout_s is None else float(stall_timeout_s)
        )
        self.ends = time.monotonic() + self.total_s
        self.stalled: dict[str, str] = {}  # host -> what happened there

    def remaining(self) -> float:
        return self.ends - time.monotonic()

    def expired_error(self, url: str) -> TimeoutError:
        return TimeoutError(
            f"{url}: the download deadline of {self.total_s:g} s ran out "
            f"(${ENV_DOWNLOAD_DEADLINE} sets it; a server that stalls or drips fails at it)"
        )

    def timeout(self, url: str) -> float:
        """The socket timeout for the next operation on ``url``; TimeoutError if none is left."""
        host = urlsplit(url).netloc
        if host in self.stalled:
            raise TimeoutError(
                f"{url}: not tried, {host} stalled earlier in this fetch ({self.stalled[host]})"
            )
        left = self.remaining()
        if left <= 0:
            raise self.expired_error(url)
        return min(self.stall_timeout_s, left)

    def note_stall(self, url: str, err: BaseException) -> TimeoutError:
        """Records that ``url``'s host timed out and returns the error to raise in its place."""
        if self.remaining() <= 0:
            return self.expired_error(url)
        host = urlsplit(url).netloc
        self.stalled[host] = f"no answer for {self.stall_timeout_s:g} s"
        return TimeoutError(
            f"{url}: the server sent nothing for {self.stall_timeout_s:g} s (it accepted the "
            f"connection but stalled: {err}); {host} is not tried again in this fetch"
        )


def _is_timeout(err: BaseException) -> bool:
    # urlopen wraps a connect timeout in URLError; a timeout waiting for the answer comes bare.
    return isinstance(err, TimeoutError) or (
        isinstance(err, urllib.error.URLError) and isinstance(err.reason, TimeoutError)
    )


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_sha256(path: str | os.PathLike, *, gzip_content: bool = False) -> str:
    """sha256 of a file's bytes, or of its decompressed bytes for ``gzip_content`` (streamed)."""
    digest = hashlib.sha256()
    opener = gzip.open if gzip_content else open
    with opener(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _checksum_error(
    spec: FileSpec, where: str, actual: str, *, downloaded: bool = False
) -> ChecksumError:
    what = "sha256 of the decompressed content" if spec.gzip_content else "sha256"
    if downloaded:  # the temporary file is already gone: nothing to delete
        advice = (
            "The server returned different content (nothing was kept); try again later, or "
            "download the file by hand and point DPPREP_DATA_DIR at it"
        )
    else:
        advice = (
            "The file is corrupt, truncated or a different version; delete it so that it is"
            " downloaded again, or replace it with the file from"
            f" {spec.urls[0] if spec.urls else 'its source'}"
        )
    return ChecksumError(
        f"checksum mismatch for {spec.relpath} ({where}): expected {what} {spec.sha256}, got"
        f" {actual}. {advice}"
    )


def read_verified(path: str | os.PathLike, spec: FileSpec, *, verify: bool = True) -> bytes:
    """A file's (decompressed, for .gz) bytes, after checking its sha256 against the registry."""
    try:
        data = (
            gzip.decompress(Path(path).read_bytes())
            if spec.gzip_content
            else Path(path).read_bytes()
        )
    except (
        OSError,
        EOFError,
        zlib.error,
    ) as err:  # gzip.BadGzipFile is an OSError; a damaged stream is zlib.error
        raise ChecksumError(f"cannot read {spec.relpath} at {path}: {err}") from err
    if verify:
        actual = sha256_bytes(data)
        if actual != spec.sha256:
            raise _checksum_error(spec, str(path), actual)
    return data


def verify_file(path: str | os.PathLike, spec: FileSpec) -> None:
    """Raises ChecksumError unless the file at ``path`` matches ``spec``'s sha256."""
    try:
        actual = file_sha256(path, gzip_content=spec.gzip_content)
    except (OSError, EOFError, zlib.error) as err:
        raise ChecksumError(f"cannot read {spec.relpath} at {path}: {err}") from err
    if actual != spec.sha256:
        raise _checksum_error(spec, str(path), actual)


def find(relpath: str, data_dir: str | os.PathLike | None = None) -> Path | None:
    """The first existing ``<dir>/<relpath>`` over the search order, or None."""
    for directory, _ in search_dirs(data_dir):
        candidate = directory / relpath
        if candidate.is_file():
            return candidate
    return None


def not_found_message(
    relpath: str, data_dir: str | os.PathLike | None, urls: tuple[str, ...], reason: str
) -> str:
    looked = "\n".join(f"  - {d / relpath}  ({origin})" for d, origin in search_dirs(data_dir))
    source = (
        "\n".join(f"  {u}" for u in urls)
        if urls
        else "  (no download URL: the file is user-provided)"
    )
    return (
        f"data file {relpath!r} not found ({reason}). Looked in:\n{looked}\nCanonical"
        f" source:\n{source}\nPut the file at <dir>/{relpath} and pass data_dir=<dir> or set"
        f" {ENV_DATA_DIR}=<dir>; with internet access, `python -m dpprep.data fetch` downloads it"
        f" into the cache (loading does so too unless download=False or {ENV_NO_DOWNLOAD}=1)."
    )


def resolve(
    relpath: str,
    data_dir: str | os.PathLike | None = None,
    *,
    download: bool | None = None,
    budget: FetchBudget | None = None,
) -> Path:
    """The path of a registered file, downloading it into the cache if it is missing everywhere
    (within ``budget``: a new :class:`FetchBudget` when None; share one to bound several files)."""
    spec = FILES_BY_PATH.get(relpath)
    if spec is None:
        raise ValueError(f"unknown data file {relpath!r}")
    # Read the switch before looking: a malformed DPPREP_NO_DOWNLOAD is an error whether or not
    # this call needs a download (else a typo goes unnoticed until the day a file is missing).
    enabled = downloads_enabled(download)
    found = find(relpath, data_dir)
    if found is not None:
        return found
    if not enabled:
        reason = f"downloads are disabled (download=False or {ENV_NO_DOWNLOAD}=1)"
        raise DataNotFoundError(not_found_message(relpath, data_dir, spec.urls, reason))
    missing = [s for s in archive_siblings(spec) if s is spec or find(s.relpath, data_dir) is None]
    if budget is None:  # before the try: a malformed $DPPREP_DOWNLOAD_DEADLINE is a ValueError
        budget = FetchBudget()
    try:
        return fetch(missing, cache_dir(), budget=budget)[relpath]
    except (OSError, http.client.HTTPException, zipfile.BadZipFile, ImportError) as err:
        reason = f"download into the cache failed: {type(err).__name__}: {err}"
        raise DataNotFoundError(not_found_message(relpath, data_dir, spec.urls, reason)) from err


def _download(url: str, directory: Path, name: str, budget: FetchBudget) -> Path:
    """Streams ``url`` into a new temporary file in ``directory``; the caller removes or renames it.

    TimeoutError when the server stalls for the budget's stall timeout or the fetch's deadline
    passes.
    """
    timeout = budget.timeout(url)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{name}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as handle, urlopen(url, timeout=timeout) as response:
            # read1 returns what has arrived (read(n) waits for all n bytes), so a dripping server
            # meets the deadline check between reads.
            read = (
                response.read1 if isinstance(response, http.client.HTTPResponse) else response.read
            )
            while chunk := read(_CHUNK):
                handle.write(chunk)
                if budget.remaining() <= 0:
                    raise budget.expired_error(url)
    except BaseException as err:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(err, Exception) and _is_timeout(err):
            raise budget.note_stall(url, err) from err
        raise
    return Path(tmp)


def _install(data: bytes | Path, spec: FileSpec, root: Path, url: str) -> Path:
    """Verifies ``data`` (bytes, or a temporary file it consumes) and moves it to
    ``root/relpath``."""
    dest = root / spec.relpath
    dest.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, Path):
        tmp = data
    else:
        fd, name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
        tmp = Path(name)
    try:
        if not isinstance(data, Path):
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
        try:
            actual = file_sha256(tmp, gzip_content=spec.gzip_content)
        except (OSError, EOFError, zlib.error):
            actual = "(unreadable: not a valid gzip file)"
        if actual != spec.sha256:
            raise _checksum_error(spec, f"downloaded from {url}", actual, downloaded=True)
        os.chmod(tmp, umask_mode())  # mkstemp creates 0600; a shared cache must be readable
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return dest


def credit_rows_to_csv(rows: list[list]) -> bytes:
    """The credit-default sheet (rows of cells, as xlrd returns them) as the CSV dpprep reads.

    The sheet's first row is ``['', 'X1', ..., 'X23', 'Y']`` and its second the long names
    (``ID, LIMIT_BAL, ...``); the CSV's header is ``ID,X1..X23,Y``, then the integer data rows,
    with CRLF line ends, formatted as in the converted copy whose sha256 the registry holds.
    """

    def cell(value) -> str:
        if isinstance(value, float) and value.is_integer():
            # The converted copy writes nonzero multiples of 100,000 as e.g. "5.00E+05" (its
            # converter's display format); reproduce that so the sha256 matches.
            if value != 0 and value % 100_000 == 0:
                return f"{value:.2E}"
            return str(int(value))
        return str(value).strip()

    header = ["ID", *(cell(v) for v in rows[0][1:])]
    lines = [",".join(header)] + [
        ",".join(cell(v) for v in row) for row in rows[2:] if any(cell(v) for v in row)
    ]
    return ("\r\n".join(lines) + "\r\n").encode("ascii")


def _xls_to_csv(xls: bytes) -> bytes:
    try:
        import xlrd  # optional: only the credit-default download needs it
    except ImportError as err:
        raise ImportError(
            "converting the UCI credit-default .xls needs the optional package xlrd (`pip install"
            " xlrd`); alternatively convert it yourself to"
            " credit_default/default_of_credit_card_clients.csv (header ID,X1..X23,Y, CRLF) in your"
            " data dir"
        ) from err
    sheet = xlrd.open_workbook(file_contents=xls).sheet_by_index(0)
    return credit_rows_to_csv([sheet.row_values(i) for i in range(sheet.nrows)])


def _zip_member(archive: zipfile.ZipFile, member: str, url: str) -> bytes:
    for info in archive.infolist():
        if Path(info.filename).name == member:
            return archive.read(info)
    names = [info.filename for info in archive.infolist()]
    raise zipfile.BadZipFile(f"{url} has no member named {member!r} (members: {names})")


def fetch(
    specs: list[FileSpec] | tuple[FileSpec, ...],
    root: str | os.PathLike,
    *,
    budget: FetchBudget | None = None,
) -> dict[str, Path]:
    """Downloads ``specs`` into ``root/<relpath>`` (verified), one download per archive URL.

    Mirrors are tried in order; a checksum mismatch on every mirror raises ChecksumError (no file
    is left behind), any other failure re-raises the last mirror's error. ``budget`` bounds the
    time (a new :class:`FetchBudget` when None); pass one budget to several calls to bound them
    together.
    """
    budget = FetchBudget() if budget is None else budget
    root = Path(root)
    done: dict[str, Path] = {}
    groups: dict[tuple[tuple[str, ...], str | None], list[FileSpec]] = {}
    for spec in specs:
        groups.setdefault((spec.urls, spec.archive), []).append(spec)
    for (urls, archive), group in groups.items():
        last_error: BaseException | None = None
        for url in urls:
            try:
                done.update(_fetch_from(url, archive, group, root, budget))
                last_error = None
                break
            except (OSError, http.client.HTTPException, zipfile.BadZipFile, ChecksumError) as err:
                # Prefer reporting a checksum mismatch over a later mirror's network error.
                if not isinstance(last_error, ChecksumError):
                    last_error = err
        if last_error is not None:
            raise last_error
    return done


def _fetch_from(
    url: str, archive: str | None, group: list[FileSpec], root: Path, budget: FetchBudget
) -> dict[str, Path]:
    first = root / group[0].relpath
    first.parent.mkdir(parents=True, exist_ok=True)
    tmp = _download(url, first.parent, first.name, budget)
    if archive is None:
        return {group[0].relpath: _install(tmp, group[0], root, url)}
    try:
        with zipfile.ZipFile(tmp) as zipped:
            members = {spec.relpath: _zip_member(zipped, spec.member, url) for spec in group}  # type: ignore[arg-type]  # archived specs name a member
    finally:
        tmp.unlink(missing_ok=True)
    out = {}
    for spec in group:
        data = members[spec.relpath]
        if archive == "zip_xls_csv":
            data = _xls_to_csv(data)
        out[spec.relpath] = _install(data, spec, root, url)
    return out


def archive_siblings(spec: FileSpec) -> list[FileSpec]:
    """Every registered file served by the same archive as ``spec`` (fetched together)."""
    return (
        [s for s in FILES if s.urls == spec.urls and s.archive == spec.archive]
        if spec.archive
        else [spec]
    )
