"""Opens the built documentation site in a real headless Chromium (Debian's
/usr/bin/chromium, driven by Playwright) and checks the index, the quickstart and
the Python API reference: no console error, no failed request, and every internal
link on them answers 200. Then every internal link of every page of the site is
requested too. Saves screenshots of the quickstart page.

    python .ci/docs_browser_check.py SITE_DIR [--screens DIR] [--chromium PATH]

The site is served on 127.0.0.1 by Python's http.server. Exits non-zero on any
problem.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import re
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urldefrag, urljoin, urlparse

from playwright.sync_api import sync_playwright

PAGES = ["", "getting-started/quickstart/", "reference/python/"]


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):
        pass


class QuietServer(http.server.ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        # The browser drops connections it no longer needs: not a problem of the site.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("site")
    ap.add_argument("--screens", default=None)
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    args = ap.parse_args()

    handler = functools.partial(QuietHandler, directory=str(Path(args.site).resolve()))
    server = QuietServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    problems: list[str] = []
    checked: dict[str, int] = {}

    def status_of(url: str) -> int:
        if url not in checked:
            try:
                with urllib.request.urlopen(url, timeout=10) as r:
                    checked[url] = r.status
            except urllib.error.HTTPError as e:
                checked[url] = e.code
        return checked[url]

    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=args.chromium, args=["--no-sandbox", "--disable-gpu"]
        )
        for rel in PAGES:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            url = base + rel
            errors: list[str] = []
            page.on("console", lambda m, errors=errors: m.type == "error" and errors.append(m.text))
            page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
            page.on(
                "requestfailed",
                lambda r, errors=errors: errors.append(f"request failed: {r.url}"),
            )
            response = page.goto(url, wait_until="networkidle")
            if response is None or response.status != 200:
                problems.append(f"{url}: status {response.status if response else None}")
                page.close()
                continue
            title = page.title()
            links = page.eval_on_selector_all("a[href]", "els => els.map(e => e.href)")
            internal = sorted(
                {
                    urldefrag(urljoin(url, h))[0]
                    for h in links
                    if urlparse(h).hostname == "127.0.0.1"
                }
            )
            bad = [(h, status_of(h)) for h in internal if status_of(h) != 200]
            for h, s in bad:
                problems.append(f"{url}: link {h} answers {s}")
            for e in errors:
                problems.append(f"{url}: console: {e}")
            print(
                f"{'ok ' if not bad and not errors else 'BAD'} {rel or 'index'}: "
                f"'{title}', {len(internal)} internal links, {len(errors)} console errors"
            )
            if args.screens and rel.startswith("getting-started/quickstart"):
                out = Path(args.screens)
                out.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(out / "quickstart-top.png"))
                page.screenshot(path=str(out / "quickstart-full.png"), full_page=True)
                print(f"    screenshots: {out}/quickstart-top.png, quickstart-full.png")
            page.close()
        browser.close()
    # Beyond the three pages: every internal link of every page of the site answers 200.
    site = Path(args.site).resolve()
    pages = sorted(site.rglob("*.html"))
    for html in pages:
        rel = html.relative_to(site).as_posix()
        url = base + rel
        text = html.read_text(encoding="utf-8")
        for href in re.findall(r'<a [^>]*href="([^"]+)"', text):
            target = urldefrag(urljoin(url, href))[0]
            if urlparse(target).hostname == "127.0.0.1" and status_of(target) != 200:
                problems.append(f"{url}: link {href} answers {status_of(target)}")
    print(f"ok  {len(pages)} pages: {len(checked)} internal links checked")
    server.shutdown()
    for prob in problems:
        print(f"docs browser check: {prob}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
