"""The vendor matrix blocks of docs/spec.md and docs/spec-diff.md.

``python -m reference_impl.cli.vendor_tables`` prints the summary block of docs/spec.md (ops
per policy and the device-wide rules, per backend), ``--ops`` the block of docs/spec-diff.md
(every op the backends do not list alike); each goes between its markers, and
``tests/test_vendor_specs.py`` checks that the files hold exactly this.
"""

from __future__ import annotations

import re
import sys

from ..spectools.vendor_matrix import block, columns, counts_table, ops_table

SUMMARY_MARKERS = ("<!-- vendor-matrix:start -->", "<!-- vendor-matrix:end -->")
DOCS_MARKERS = ("<!-- vendor-ops:start -->", "<!-- vendor-ops:end -->")


def between(text: str, markers: tuple[str, str]) -> str | None:
    """The text between ``markers`` in ``text`` (None when they are absent)."""
    m = re.search(re.escape(markers[0]) + r"\n(.*?)" + re.escape(markers[1]), text, flags=re.S)
    return m.group(1) if m else None


def summary_block(torch_version: str) -> str:
    return block(counts_table(columns(torch_version)), torch_version, "")


def docs_block(torch_version: str) -> str:
    return block(ops_table(columns(torch_version)), torch_version, " --ops")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    version = "2.13"  # the release the docs' figures describe (the pinned torch)
    start, end = DOCS_MARKERS if "--ops" in args else SUMMARY_MARKERS
    text = docs_block(version) if "--ops" in args else summary_block(version)
    sys.stdout.write(f"{start}\n{text}{end}\n")
    return 0


__all__ = ["DOCS_MARKERS", "SUMMARY_MARKERS", "between", "docs_block", "main", "summary_block"]

if __name__ == "__main__":
    raise SystemExit(main())
