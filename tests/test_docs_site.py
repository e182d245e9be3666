"""The documentation site (``docs/``, ``make docs``) builds with Sphinx with warnings as errors, its
API reference covers every module of the package, and its pages render in a real browser (Debian's
headless Chromium, driven by Selenium through Debian's chromedriver) without console errors and
with every code block within the page's width (at a 1280-pixel-wide window, a laptop's).

Without Chromium the browser test skips, unless ``DPPREP_REQUIRE_BROWSER=1`` (CI, which installs
it) makes that a failure. The examples on the pages are run by ``tests/test_docs_examples.py``.
"""

from __future__ import annotations

import functools
import html
import http.server
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # builds the whole site with Sphinx and opens every page in Chromium

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
# The pages a newcomer's path goes through: the how-to guides and the reproduction's entry point.
GUIDES = [
    "getting-started",
    "guides/plan",
    "guides/own-model",
    "guides/own-loop",
    "guides/sweeps",
    "guides/private-selection",
    "guides/auditing",
    "guides/preprocessing",
    "guides/speed",
    "papers/hu2024",
    "papers/dpsgdf",
    "papers/corrdp",
    "reproducing",
]
# Every page of the site, from its sources: the Markdown pages and the notebooks (tutorials).
PAGES = sorted(
    [
        *(
            path.relative_to(REPO / "docs").with_suffix("").as_posix()
            for path in (REPO / "docs").rglob("*.md")
            if "_build" not in path.parts
        ),
        *(f"tutorials/{nb.stem}" for nb in (REPO / "notebooks").glob("*.ipynb")),
    ]
)
# The browser's window: furo shows both sidebars' worth of layout and a content column of 46em.
WINDOW = (1280, 900)


def _package_modules() -> set[str]:
    """Every module of the package but ``__main__``s and the aliases left at moved modules' old
    names."""
    modules = set()
    for path in (REPO / "dpprep").rglob("*.py"):
        parts = path.relative_to(REPO).with_suffix("").parts
        if (
            "__pycache__" in parts
            or parts[-1] == "__main__"
            or "sys.modules[__name__] =" in path.read_text()
        ):
            continue
        modules.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return modules


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site built afresh (never a stale ``docs/_build``), as ``make docs`` builds it."""
    out = tmp_path_factory.mktemp("docs") / "html"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "sphinx",
            "-b",
            "html",
            "-W",
            "--keep-going",
            "-q",
            str(REPO / "docs"),
            str(out),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, f"the docs build failed or warned:\n{done.stderr[-6000:]}"
    return out


def test_the_site_has_every_guide_the_tutorials_and_an_api_entry_for_every_module(site):
    for page in [
        *GUIDES,
        "index",
        "results",
        "api/index",
        "tutorials/index",
        *(f"tutorials/{nb.stem}" for nb in (REPO / "notebooks").glob("*.ipynb")),
    ]:
        assert (site / f"{page}.html").is_file(), page
    api = "".join(path.read_text(encoding="utf-8") for path in (site / "api").glob("*.html"))
    documented = set(re.findall(r'id="module-(dpprep[\w.]*)"', api))
    assert documented == _package_modules(), (
        "every module of dpprep has its section in the API reference"
    )
    # Docstrings are rendered, not only named: the core page shows DPPlan's own words and a doctest.
    core = (site / "api" / "core.html").read_text(encoding="utf-8")
    assert 'id="dpprep.plan.DPPlan"' in core and "&gt;&gt;&gt;" in core
    # The index links every guide (a page missing from the navigation is a page nobody finds).
    index = (site / "index.html").read_text(encoding="utf-8")
    for page in GUIDES:
        assert f'href="{page}.html"' in index, page


def _signatures(page: Path) -> dict[str, str]:
    """Each API entry's id and its signature line as the page shows it."""
    text = page.read_text(encoding="utf-8")
    return {
        m["id"]: " ".join(html.unescape(re.sub(r"<[^>]+>", "", m["sig"])).split())
        for m in re.finditer(
            r'<dt class="sig sig-object py" id="(?P<id>[^"]+)">(?P<sig>.*?)</dt>', text, re.S
        )
    }


def test_api_entries_show_real_signatures(site):
    signatures = {}
    for page in (site / "api").glob("*.html"):
        signatures |= _signatures(page)
    # A wrapper that hides its function (a decorator without functools.wraps, typing.Protocol's
    # placeholder __init__) shows as (*args, **kwargs): the reader cannot tell what to pass.
    fake = {name: sig for name, sig in signatures.items() if "(*args, **kwargs)" in sig}
    assert not fake, f"API entries with a placeholder signature: {fake}"
    # The protocols are shown without one (they are implemented, not called) ...
    for protocol in ("dpprep.sampling.Sampler", "dpprep.plan.PlanAccountant"):
        assert signatures[protocol] == f"class {protocol}¶", signatures[protocol]
    # ... and the real signatures are there: the core's entry points, and a custom_vmap function.
    assert signatures["dpprep.step.dp_step"].startswith("dpprep.step.dp_step(params, opt_state,")
    assert "target_epsilon" in signatures["dpprep.algorithms.fit"]
    assert signatures["dpprep.tracing.everywhere"].startswith("dpprep.tracing.everywhere(ok")


def test_the_site_fetches_nothing_from_the_network(site):
    # A reader offline (and this project's CI) must get the whole page: no CDN scripts, styles or
    # fonts.
    for path in site.rglob("*.html"):
        text = path.read_text(encoding="utf-8")
        remote = re.findall(r'<(?:script|link|img)[^>]+(?:src|href)="(https?:)?//[^"]+"', text)
        assert not remote, f"{path.relative_to(site)} loads {remote[:3]}"


@pytest.fixture(scope="module")
def server(site):
    handler = functools.partial(_QuietHandler, directory=str(site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the base class's signature
        pass


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    if not (CHROMIUM and CHROMEDRIVER):
        message = (
            "Debian's chromium and chromium-driver are not installed (apt-get install chromium"
            " chromium-driver)"
        )
        if os.environ.get("DPPREP_REQUIRE_BROWSER") == "1":
            pytest.fail(message)
        pytest.skip(message)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    # Headless, as root in a sandbox, and quiet on a closed network (no background connections).
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-quic",
        f"--window-size={WINDOW[0]},{WINDOW[1]}",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium')}",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def _render(browser, url: str) -> list[dict]:
    """Opens ``url``, waits until it has loaded, and returns the console's error entries."""
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get_log("browser")  # drop what an earlier page logged
    browser.get(url)
    WebDriverWait(browser, 30).until(
        lambda d: d.execute_script("return document.readyState") == "complete"
    )
    return [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]


@pytest.mark.parametrize(
    "page, expected",
    [
        ("index.html", "Where to start"),
        ("api/core.html", "DPPlan"),
    ],
)
def test_a_page_renders_in_a_browser_without_console_errors(browser, server, page, expected):
    errors = _render(browser, f"{server}/{page}")
    assert not errors, f"{page}: console errors {errors}"
    assert "dpprep" in browser.title
    body = browser.find_element("tag name", "body")
    assert expected in body.text, f"{page} does not show {expected!r}"
    # The theme's stylesheet applied (an unstyled page would also be "without errors"): furo's
    # sidebar is laid out beside the content, and the page has its scripts' navigation.
    sheets = browser.execute_script(
        "return Array.from(document.styleSheets).filter(s => s.cssRules.length).length"
    )
    assert sheets >= 2, f"{page}: stylesheets not loaded"
    assert browser.find_element("css selector", ".sidebar-drawer").is_displayed()


# The code blocks (``pre``: examples, outputs, shell lines, docstring examples, notebook cells)
# whose text is wider than the block, as [scrollWidth, clientWidth, longest line].
OVERFLOWING = """
return Array.from(document.querySelectorAll("pre"))
  .filter(p => p.scrollWidth > p.clientWidth)
  .map(p => [p.scrollWidth, p.clientWidth,
             p.textContent.split("\\n").reduce((a, l) => (l.length > a.length ? l : a), "")]);
"""


def test_every_page_is_built_and_checked():
    built = {
        path.relative_to(REPO / "docs").with_suffix("").as_posix()
        for path in (REPO / "docs").rglob("*.md")
        if "_build" not in path.parts
    }
    assert "getting-started" in built and "guides/own-model" in built and len(PAGES) >= 30


@pytest.mark.parametrize("page", PAGES)
def test_no_code_block_is_wider_than_the_page(browser, server, page):
    errors = _render(browser, f"{server}/{page}.html")
    assert not errors, f"{page}: console errors {errors}"
    assert browser.execute_script("return window.innerWidth") == WINDOW[0]
    assert browser.find_elements("css selector", "article"), f"{page}: no article rendered"
    wide = browser.execute_script(OVERFLOWING)
    assert not wide, f"{page}: code cut off at the right edge (scroll width > width, line): " + (
        "; ".join(f"{sw} > {cw} px: {line.strip()[:100]!r}" for sw, cw, line in wide)
    )


def test_the_overflow_check_fails_on_a_page_with_a_wide_code_block(browser, server, site):
    wide = site / "wide.html"
    line = "x = " + " + ".join(["value"] * 40)
    wide.write_text(
        "<html><head><title>dpprep</title></head><body><article><pre>short\n"
        f"{line}</pre><pre>fits</pre></article></body></html>"
    )
    try:
        _render(browser, f"{server}/wide.html")  # (a bare page: the favicon's 404 aside)
        found = browser.execute_script(OVERFLOWING)
    finally:
        wide.unlink()
    assert len(found) == 1 and found[0][2] == line


def test_the_browser_check_fails_on_a_page_with_a_console_error(browser, server, site):
    # The check above can fail: a page whose script throws is reported with the error.
    broken = site / "broken.html"
    broken.write_text(
        "<html><head><title>dpprep</title></head><body><script>undefined_name();</script></body></html>"
    )
    try:
        errors = _render(browser, f"{server}/broken.html")
    finally:
        broken.unlink()
    # (the browser's first page may also report the site's missing favicon.ico)
    assert any("undefined_name" in error["message"] for error in errors), errors
