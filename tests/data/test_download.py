"""The download path, with the URL opener monkeypatched to serve local bytes (never the network)."""

from __future__ import annotations

import csv
import http.client
import io
import os
import stat
import urllib.error
import zipfile

import numpy as np
import pytest

from dpprep.data import ChecksumError, DataNotFoundError, load
from dpprep.data import download as dl
from dpprep.data.registry import FILES_BY_PATH

SEPSIS = [
    f"sepsis/s41598-020-73558-3_sepsis_survival_{c}_cohort.csv"
    for c in ("primary", "study", "validation")
]


def test_embedded_checksums_match_the_data_copy_sha256sums(data_dir):
    """The package's table against the copy's independent SHA256SUMS (gz entries: content
    hashes)."""
    listed = dict(
        reversed(line.split())
        for line in (data_dir / "SHA256SUMS").read_text().splitlines()
        if line
    )
    assert set(listed) == set(FILES_BY_PATH)
    for relpath, sha in listed.items():
        spec = FILES_BY_PATH[relpath]
        if spec.gzip_content:  # the copy lists the .gz bytes; the registry holds the content hash
            assert dl.file_sha256(data_dir / relpath) == sha and spec.sha256 != sha
        else:
            assert spec.sha256 == sha


class FakeWeb:
    """Serves registered URLs from bytes; records every request; unknown URLs fail like no
    network."""

    def __init__(self, pages: dict[str, bytes | Exception]):
        self.pages = pages
        self.requests: list[str] = []

    def __call__(self, url, timeout=None):
        self.requests.append(url)
        page = self.pages.get(url)
        if page is None:
            raise urllib.error.URLError(f"no route to {url}")
        if isinstance(page, Exception):
            raise page
        return io.BytesIO(page)


@pytest.fixture
def web(monkeypatch):
    def install(pages):
        fake = FakeWeb(pages)
        monkeypatch.setattr(dl, "urlopen", fake)
        monkeypatch.setenv(dl.ENV_NO_DOWNLOAD, "0")
        return fake

    return install


def _leftovers(root):
    return [p for p in root.rglob("*") if p.is_file() and p.name.endswith(".part")]


def test_download_verifies_and_installs_into_cache(tmp_path, data_dir, web):
    spec = FILES_BY_PATH["insurance/insurance.csv"]
    fake = web({spec.urls[0]: (data_dir / spec.relpath).read_bytes()})
    ds = load("insurance")  # nothing local: fetched into $DPPREP_CACHE_DIR
    cached = tmp_path / "cache" / "insurance" / "insurance.csv"
    assert cached.read_bytes() == (data_dir / spec.relpath).read_bytes()
    assert ds.x_train.shape == (1337, 8) and fake.requests == [spec.urls[0]]
    assert not _leftovers(tmp_path)
    load("insurance")  # second load: found in the cache, no new request
    assert fake.requests == [spec.urls[0]]


def test_gzip_download_checks_content_and_falls_back_to_mirror(tmp_path, data_dir, web):
    spec = FILES_BY_PATH["mnist/t10k-labels-idx1-ubyte.gz"]
    assert len(spec.urls) == 2
    # the first mirror is down; the second serves a (re-compressed) copy with the right content
    fake = web(
        {
            spec.urls[0]: urllib.error.URLError("down"),
            spec.urls[1]: (data_dir / spec.relpath).read_bytes(),
        }
    )
    path = dl.resolve(spec.relpath)
    assert path == tmp_path / "cache" / spec.relpath
    assert fake.requests == list(spec.urls)
    dl.verify_file(path, spec)


class _CutOff(io.BytesIO):
    """A response whose connection drops mid-transfer."""

    def read(self, size=-1):
        raise http.client.IncompleteRead(b"partial", 1000)


def test_cut_off_download_tries_the_next_mirror_then_reports_clearly(
    tmp_path, data_dir, web, monkeypatch
):
    spec = FILES_BY_PATH["mnist/t10k-labels-idx1-ubyte.gz"]
    serve = web({spec.urls[1]: (data_dir / spec.relpath).read_bytes()})
    monkeypatch.setattr(
        dl, "urlopen", lambda url, timeout=None: _CutOff() if url == spec.urls[0] else serve(url)
    )
    assert dl.resolve(spec.relpath) == tmp_path / "cache" / spec.relpath

    # Every mirror cut off: an error naming the file and the URL, and no partial file left.
    (tmp_path / "cache" / spec.relpath).unlink()
    monkeypatch.setattr(dl, "urlopen", lambda url, timeout=None: _CutOff())
    with pytest.raises(DataNotFoundError) as info:
        dl.resolve(spec.relpath)
    assert spec.relpath in str(info.value) and spec.urls[0] in str(info.value)
    assert not _leftovers(tmp_path)


def test_checksum_mismatch_leaves_nothing_behind(tmp_path, data_dir, web):
    spec = FILES_BY_PATH["insurance/insurance.csv"]
    bad = (data_dir / spec.relpath).read_bytes() + b"\n"
    web({spec.urls[0]: bad})
    with pytest.raises(ChecksumError) as info:
        load("insurance")
    message = str(info.value)
    assert spec.sha256 in message and dl.sha256_bytes(bad) in message and spec.urls[0] in message
    assert "nothing was kept" in message
    cache = tmp_path / "cache"
    assert not [p for p in cache.rglob("*") if p.is_file()]


def test_gzip_mirror_serving_garbage_is_a_checksum_error(tmp_path, web):
    spec = FILES_BY_PATH["mnist/t10k-labels-idx1-ubyte.gz"]
    web({spec.urls[0]: b"<html>not found</html>", spec.urls[1]: urllib.error.URLError("down")})
    with pytest.raises(ChecksumError, match=spec.sha256):
        dl.resolve(spec.relpath)
    assert not [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]


def test_network_failure_message(tmp_path, web):
    spec = FILES_BY_PATH["insurance/insurance.csv"]
    web({})
    with pytest.raises(DataNotFoundError) as info:
        load("insurance")
    message = str(info.value)
    assert "download into the cache failed" in message and "no route" in message
    assert spec.urls[0] in message and "DPPREP_DATA_DIR" in message
    assert not _leftovers(tmp_path)


def test_downloads_can_be_disabled(tmp_path, web, monkeypatch):
    fake = web({})
    with pytest.raises(DataNotFoundError, match="downloads are disabled"):
        load("insurance", download=False)
    monkeypatch.setenv(dl.ENV_NO_DOWNLOAD, "1")
    with pytest.raises(DataNotFoundError, match="downloads are disabled"):
        load("insurance")
    assert fake.requests == []
    with pytest.raises(DataNotFoundError, match="download into the cache failed"):
        load("insurance", download=True)  # an explicit argument overrides the environment
    assert len(fake.requests) == 1


def _zip(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def test_sepsis_zip_extracts_every_cohort_in_one_download(tmp_path, data_dir, web):
    url = FILES_BY_PATH[SEPSIS[0]].urls[0]
    archive = _zip(
        {f"some folder/{rel.split('/')[1]}": (data_dir / rel).read_bytes() for rel in SEPSIS}
    )
    fake = web({url: archive})
    ds = load("sepsis")
    assert ds.x_train.shape == (110204, 3) and fake.requests == [url]
    for rel in SEPSIS:
        dl.verify_file(tmp_path / "cache" / rel, FILES_BY_PATH[rel])
    assert not _leftovers(tmp_path)


def test_zip_without_the_member(tmp_path, web):
    url = FILES_BY_PATH[SEPSIS[0]].urls[0]
    web({url: _zip({"readme.txt": b"hello"})})
    with pytest.raises(DataNotFoundError, match="no member named"):
        load("sepsis")
    assert not [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]


def test_credit_xls_needs_xlrd_with_a_clear_message(tmp_path, web, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_xlrd(name, *args, **kwargs):
        if name == "xlrd":
            raise ImportError("No module named 'xlrd'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_xlrd)
    spec = FILES_BY_PATH["credit_default/default_of_credit_card_clients.csv"]
    web({spec.urls[0]: _zip({"default of credit card clients.xls": b"\xd0\xcf\x11\xe0 fake xls"})})
    with pytest.raises(DataNotFoundError, match="pip install xlrd"):
        load("credit_default")
    assert not [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]


def test_credit_sheet_conversion_reproduces_the_checksummed_csv(data_dir):
    """The .xls -> CSV step, fed the sheet's cells (as xlrd returns them), gives the exact bytes."""
    raw = (data_dir / "credit_default" / "default_of_credit_card_clients.csv").read_bytes()
    rows = list(csv.reader(io.StringIO(raw.decode("ascii"))))
    names = ["ID", "LIMIT_BAL", "SEX", "EDUCATION", "MARRIAGE", "AGE"] + [
        f"n{i}" for i in range(19)
    ]
    sheet = (
        [["", *rows[0][1:]], names]
        + [[float(v) for v in row] for row in rows[1:]]
        + [["" for _ in names]]
    )
    out = dl.credit_rows_to_csv(sheet)
    assert (
        dl.sha256_bytes(out)
        == FILES_BY_PATH["credit_default/default_of_credit_card_clients.csv"].sha256
    )
    assert b"5.00E+05" in out and np.isclose(float("5.00E+05"), 500000)


def test_downloaded_files_honour_the_umask(tmp_path, data_dir, web):
    spec = FILES_BY_PATH["insurance/insurance.csv"]
    web({spec.urls[0]: (data_dir / spec.relpath).read_bytes()})
    old = os.umask(0o022)
    try:
        load("insurance", download=True)
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "cache" / spec.relpath).stat().st_mode) == 0o644


@pytest.mark.parametrize("value", ["1", "on", "ON", " Yes ", "True"])
def test_no_download_accepts_every_spelling_of_true(monkeypatch, value):
    monkeypatch.setenv(dl.ENV_NO_DOWNLOAD, value)
    assert dl.downloads_enabled() is False


@pytest.mark.parametrize("value", ["", "0", "off", "No", "FALSE"])
def test_no_download_false_spellings_leave_downloads_on(monkeypatch, value):
    monkeypatch.setenv(dl.ENV_NO_DOWNLOAD, value)
    assert dl.downloads_enabled() is True


def test_no_download_rejects_other_values(monkeypatch):
    monkeypatch.setenv(dl.ENV_NO_DOWNLOAD, "maybe")
    with pytest.raises(ValueError, match="DPPREP_NO_DOWNLOAD='maybe'"):
        dl.downloads_enabled()
    with pytest.raises(ValueError, match="DPPREP_NO_DOWNLOAD"):
        load("insurance")


def test_no_download_rejects_other_values_even_when_the_file_is_present(monkeypatch, data_dir):
    # Issue 21: the value was read only when a download was needed.
    relpath = "mnist/t10k-labels-idx1-ubyte.gz"
    assert dl.resolve(relpath, data_dir) == data_dir / relpath
    monkeypatch.setenv(dl.ENV_NO_DOWNLOAD, "maybe")
    with pytest.raises(ValueError, match="DPPREP_NO_DOWNLOAD='maybe' is not a boolean"):
        dl.resolve(relpath, data_dir)


def test_gzip_with_a_damaged_stream_is_a_checksum_error(tmp_path, data_dir):
    """A valid gzip header over damaged deflate data raises zlib.error inside gzip, which must come
    out as the module's ChecksumError (verify and load report it instead of crashing)."""
    spec = FILES_BY_PATH["mnist/t10k-labels-idx1-ubyte.gz"]
    raw = bytearray((data_dir / spec.relpath).read_bytes())
    raw[20:60] = b"\xff" * 40  # inside the deflate stream, past the 10-byte header
    damaged = tmp_path / "damaged.gz"
    damaged.write_bytes(bytes(raw))
    with pytest.raises(ChecksumError, match="cannot read|checksum"):
        dl.verify_file(damaged, spec)
    with pytest.raises(ChecksumError, match="cannot read|checksum"):
        dl.read_verified(damaged, spec)


@pytest.fixture
def stalled_server():
    """A local HTTP 'server' that accepts every connection and never sends a byte (no network)."""
    import socket
    import threading

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held = []

    def accept():
        while True:
            try:
                held.append(listener.accept()[0])
            except OSError:  # closed at teardown
                return

    threading.Thread(target=accept, daemon=True).start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}/"
    listener.close()
    for conn in held:
        conn.close()


def _route_to(monkeypatch, server, requests):
    """Every registered URL goes to ``server`` (through the real urlopen), recorded in
    ``requests``."""
    import urllib.request

    def opener(url, timeout=None):
        requests.append((url, timeout))
        return urllib.request.urlopen(server, timeout=timeout)

    monkeypatch.setattr(dl, "urlopen", opener)
    monkeypatch.setenv(dl.ENV_NO_DOWNLOAD, "0")


def test_stalled_server_fails_load_at_the_deadline(monkeypatch, stalled_server):
    import time

    requests: list = []
    _route_to(monkeypatch, stalled_server, requests)
    monkeypatch.setenv(dl.ENV_DOWNLOAD_DEADLINE, "1.5")
    start = time.monotonic()
    with pytest.raises(DataNotFoundError) as info:
        load("mnist")
    elapsed = time.monotonic() - start
    assert elapsed < 5, elapsed  # was 2 mirrors x 60 s
    message = str(info.value)
    assert "mnist/" in message and "download deadline of 1.5 s ran out" in message, message
    assert dl.ENV_DOWNLOAD_DEADLINE in message
    assert requests and all(timeout <= 1.5 for _, timeout in requests)
    assert not _leftovers(dl.cache_dir().parent)


def test_stalled_host_is_not_retried_and_the_cli_fetch_is_bounded(
    monkeypatch, stalled_server, capsys
):
    import time

    from dpprep.data.__main__ import main

    requests: list = []
    _route_to(monkeypatch, stalled_server, requests)
    monkeypatch.setattr(dl, "STALL_TIMEOUT_S", 0.5)
    monkeypatch.setenv(dl.ENV_DOWNLOAD_DEADLINE, "20")
    start = time.monotonic()
    assert main(["fetch", "mnist"]) == 1
    elapsed = time.monotonic() - start
    # 4 files x 2 mirrors: each mirror's host waited on once (0.5 s), then skipped at once.
    assert elapsed < 4, elapsed
    assert [url for url, _ in requests] == list(
        FILES_BY_PATH["mnist/train-images-idx3-ubyte.gz"].urls
    )
    out = capsys.readouterr().out
    assert out.count("FAILED   mnist/") == 4 and "Traceback" not in out
    # the first file reports the stall; the other three that its hosts were skipped
    assert (
        out.count("the server sent nothing for 0.5 s") == 1
        and out.count("stalled earlier in this fetch") == 3
    ), out


def test_stall_message_names_the_url_and_the_wait(monkeypatch, stalled_server, tmp_path):
    requests: list = []
    _route_to(monkeypatch, stalled_server, requests)
    spec = FILES_BY_PATH["insurance/insurance.csv"]
    with pytest.raises(
        TimeoutError, match=r"the server sent nothing for 0\.3 s .*not tried again in this fetch"
    ) as info:
        dl.fetch(
            [spec], tmp_path / "root", budget=dl.FetchBudget(deadline_s=10, stall_timeout_s=0.3)
        )
    assert spec.urls[0] in str(info.value)
    assert not _leftovers(tmp_path)


@pytest.mark.parametrize("value", ["soon", "0", "-3", "inf", "nan"])
def test_download_deadline_must_be_a_positive_number(monkeypatch, value):
    monkeypatch.setenv(dl.ENV_DOWNLOAD_DEADLINE, value)
    with pytest.raises(
        ValueError, match=f"{dl.ENV_DOWNLOAD_DEADLINE}=.* is not a number of seconds > 0"
    ):
        dl.FetchBudget()


class _Slow(io.BytesIO):
    """A response that takes ``delay`` seconds to deliver its bytes."""

    def __init__(self, data: bytes, delay: float):
        super().__init__(data)
        self.delay = delay

    def read(self, size=-1):
        import time

        time.sleep(self.delay)
        self.delay = 0.0
        return super().read(size)


def test_one_deadline_bounds_every_file_of_a_load(monkeypatch, data_dir):
    """Four MNIST files at 0.6 s each: each alone fits a 1.5 s deadline, the load as a whole does
    not."""
    requests = []

    def slow(url, timeout=None):
        requests.append(url)
        relpath = next(s.relpath for s in FILES_BY_PATH.values() if url in s.urls)
        return _Slow((data_dir / relpath).read_bytes(), 0.6)

    monkeypatch.setattr(dl, "urlopen", slow)
    monkeypatch.setenv(dl.ENV_NO_DOWNLOAD, "0")
    monkeypatch.setenv(dl.ENV_DOWNLOAD_DEADLINE, "1.5")
    with pytest.raises(DataNotFoundError, match="the download deadline of 1.5 s ran out"):
        load("mnist")
    # one request per file until the deadline (the third file's ends past it)
    assert 2 <= len(requests) <= 3
    monkeypatch.setenv(dl.ENV_DOWNLOAD_DEADLINE, "60")
    # the files fetched before the deadline are kept
    assert load("mnist").x_train.shape[0] == 60_000


def test_malformed_deadline_is_an_error_even_when_nothing_is_downloaded(monkeypatch, data_dir):
    monkeypatch.setenv(dl.ENV_DOWNLOAD_DEADLINE, "ten minutes")
    with pytest.raises(
        ValueError, match="DPPREP_DOWNLOAD_DEADLINE='ten minutes' is not a number of seconds > 0"
    ):
        load("insurance", data_dir=data_dir)
