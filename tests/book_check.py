"""The book in a browser (run by `make book` after building it, not by `make test`: the book is made
from the full-mode run's outputs, which a quick `make test` does not produce).

The built folder build/book/ is served on 127.0.0.1 by Python's http.server, and headless Debian
Chromium (Playwright, as in tests/test_browser.py) opens every page of both editions. On every page:
no console error and no failed request (which also proves that nothing is fetched from the network:
this machine has none, so any outside request fails), every internal link leads to a page that
exists, the language link leads to the same notebook in the other language, the Colab link opens
that notebook's own file on Colab, and the line that says where the outputs come from is there. On
the pages that make figures, they are images the browser decoded (natural size above zero), the
monitor's final figure among them; math is typeset by the site's own MathJax. Search finds
`GradientTape` in the English edition and 梯度 in the Chinese one. Two screenshots per edition are
kept in build/book-screenshots/.
"""
from __future__ import annotations

import functools
import http.server
import json
import os
import re
import shutil
import threading
import urllib.parse
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "build" / "book"
SHOTS = ROOT / "build" / "book-screenshots"
NAMES = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
COLAB = "https://colab.research.google.com/github/ctlkit/ctlkit/blob/main/notebooks/{folder}{name}.ipynb"


def _images_in_outputs(nb: dict) -> int:
    return sum(1 for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])
               if "image/png" in o.get("data", {}))


EXECUTED = {name: json.loads((ROOT / "build" / "executed" / "current" / f"{name}.ipynb").read_text())
            for name in NAMES} if (ROOT / "build" / "executed" / "current").is_dir() else {}


@pytest.fixture(scope="module")
def site():
    if not (BOOK / "index.html").exists() or not (BOOK / "zh" / "index.html").exists():
        pytest.fail("no built book in build/book/: run make book (this check runs after the build)")
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=str(BOOK))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium (the book is checked in a browser)")
    from playwright import sync_api
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield chromium
        chromium.close()


class Visit:
    """One page opened: its console errors, failed requests and the page object."""

    def __init__(self, browser, url):
        self.context = browser.new_context(viewport={"width": 1280, "height": 900})
        self.page = self.context.new_page()
        self.errors, self.failed = [], []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("requestfailed", lambda r: self.failed.append(r.url))
        self.response = self.page.goto(url, wait_until="load")

    def close(self):
        self.context.close()


def _internal_links(page, base):
    hrefs = page.eval_on_selector_all("a[href]", "els => els.map(e => e.href)")
    return sorted({h.split("#")[0] for h in hrefs if h.startswith(base)})


PAGES = [("en", name) for name in ["index", *NAMES]] + [("zh", name) for name in ["index", *NAMES]]


@pytest.mark.parametrize("lang,name", PAGES, ids=[f"{lang}-{name}" for lang, name in PAGES])
def test_a_page(site, browser, lang, name):
    prefix = "" if lang == "en" else "zh/"
    visit = Visit(browser, f"{site}/{prefix}{name}.html")
    try:
        page = visit.page
        assert visit.response is not None and visit.response.status == 200
        if page.query_selector("span.math, div.math"):
            page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise"
                                   " && document.querySelectorAll('mjx-container svg').length > 0",
                                   timeout=30_000)          # typeset by the site's own MathJax
        page.wait_for_load_state("networkidle")
        assert visit.errors == [], visit.errors
        assert visit.failed == [], f"requests that failed (the site must need no network): {visit.failed}"
        # the language link goes to the same page in the other language
        lang_link = page.get_attribute("a.ctlkit-lang", "href")
        other = urllib.parse.urljoin(page.url, lang_link)
        assert other == (f"{site}/zh/{name}.html" if lang == "en" else f"{site}/{name}.html"), other
        # every internal link leads to a page that exists
        for link in _internal_links(page, site):
            path = BOOK / urllib.parse.unquote(urllib.parse.urlparse(link).path).lstrip("/")
            if path.is_dir():
                path = path / "index.html"
            assert path.is_file(), f"broken link on {page.url}: {link}"
        if name == "index":
            rows = page.eval_on_selector_all("table a[href]", "els => els.map(e => e.getAttribute('href'))")
            assert [r.removesuffix(".html") for r in rows] == NAMES
            return
        colab = page.get_attribute("a.ctlkit-colab", "href")
        assert colab == COLAB.format(folder=prefix, name=name)
        run_line = page.inner_text("p.ctlkit-run")
        assert ("full mode" in run_line) if lang == "en" else ("完整模式" in run_line), run_line
        # figures: as many decoded images in the outputs as the executed notebook has PNG outputs
        expected = _images_in_outputs(EXECUTED[name]) if EXECUTED else 0
        decoded = page.eval_on_selector_all(
            "div.cell_output img", "els => els.filter(e => e.complete && e.naturalWidth > 0).length")
        assert decoded >= expected, f"{decoded} decoded images on the page, {expected} PNG outputs in the run"
        if "ctlkit.Monitor(" in json.dumps(EXECUTED.get(name, {}).get("cells", [])):
            assert expected > 0, "a notebook that runs the monitor shows its final figure"
        if name in ("03_custom_training_loop", "08_style_transfer"):
            SHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SHOTS / f"{lang}-{name}.png"))
    finally:
        visit.close()


@pytest.mark.parametrize("lang,term", [("en", "GradientTape"), ("zh", "梯度")])
def test_search_finds_a_term(site, browser, lang, term):
    prefix = "" if lang == "en" else "zh/"
    visit = Visit(browser, f"{site}/{prefix}search.html?q={urllib.parse.quote(term)}")
    try:
        visit.page.wait_for_selector("#search-results ul.search li", timeout=30_000)
        results = visit.page.eval_on_selector_all("#search-results ul.search li a",
                                                  "els => els.map(e => e.getAttribute('href'))")
        assert any(re.search(r"01_gradient_tape", r) for r in results), results
        assert visit.errors == [], visit.errors
    finally:
        visit.close()


def test_screenshots_are_kept():
    """Run last (pytest keeps file order): the pages above saved two screenshots per edition."""
    shots = sorted(p.name for p in SHOTS.glob("*.png")) if SHOTS.exists() else []
    assert shots == ["en-03_custom_training_loop.png", "en-08_style_transfer.png",
                     "zh-03_custom_training_loop.png", "zh-08_style_transfer.png"], shots
    assert all((SHOTS / s).stat().st_size > 10_000 for s in shots)


if __name__ == "__main__":           # a quick look without pytest: python tests/book_check.py
    print(BOOK, shutil.which("chromium"), os.path.exists(BOOK / "index.html"))
