"""Render `autocast-spec matrix --format html` in headless Chromium and save a screenshot.

    python benchmarks/render_matrix_screenshot.py [--out matrix.png] [--filter conv]

Prints the page size and the render time. Needs a chromium (or google-chrome)
binary on PATH; exits 2 with a one-line message when there is none.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from reference_impl.spectools.installed_spec import load_installed_spec
from reference_impl.spectools.matrix import build_matrix, to_html

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_browser() -> str | None:
    return next((p for b in BROWSERS if (p := shutil.which(b))), None)


def screenshot(html_file: Path, png: Path, browser: str, width: int = 1400, height: int = 1000) -> float:
    start = time.perf_counter()
    subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--window-size={width},{height}",
            f"--screenshot={png}",
            html_file.as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return time.perf_counter() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("matrix.png"))
    ap.add_argument("--filter", default="", help="pre-fill the filter box (tests the script)")
    args = ap.parse_args()
    browser = find_browser()
    if browser is None:
        sys.stderr.write(f"error: no headless browser found (looked for {', '.join(BROWSERS)})\n")
        return 2
    page = to_html(build_matrix(load_installed_spec()))
    if args.filter:
        page = page.replace('id="filter" type="search"', f'id="filter" type="search" value="{args.filter}"')
    with tempfile.TemporaryDirectory() as tmp:
        html_file = Path(tmp) / "matrix.html"
        html_file.write_text(page, encoding="utf-8")
        seconds = screenshot(html_file, args.out.resolve(), browser)
    print(
        f"page: {len(page) / 1024:.0f} KiB; rendered by {Path(browser).name} in {seconds:.2f} s -> {args.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
