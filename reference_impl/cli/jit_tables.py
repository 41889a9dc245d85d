"""Markdown tables of the JIT/compiler data in the spec (for docs/jit.md).

``python -m reference_impl.cli.jit_tables`` prints the block that goes between
``<!-- jit-table:start -->`` and ``<!-- jit-table:end -->``; ``tests/test_jit_spec.py``
checks that docs/jit.md holds exactly this.
"""

from __future__ import annotations

import re
import sys

from autocast_spec.model import JitLimitation, Spec

from ..spectools.installed_spec import load_installed_spec

START = "<!-- jit-table:start -->"
END = "<!-- jit-table:end -->"
MODES = ("script", "trace", "compile")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ").strip()


def _outcome(lim: JitLimitation) -> str:
    out: str = lim.expect
    if lim.expect == "error" and lim.message:
        out += f": `` {lim.message} ``" if "`" in lim.message else f": `{lim.message}`"
    if lim.expect == "differs":
        out += " (" + ", ".join(f"{d.op} → {d.observed}" for d in lim.differs) + ")"
    if lim.later_calls:
        out += f"; later calls: {lim.later_calls}"
    return _cell(out)


def limitations_table(spec: Spec) -> str:
    rows = [
        "| id | mode | observed on torch " + spec.torch_version + " | documented | summary |",
        "|---|---|---|---|---|",
    ]
    for lim in spec.limitations:
        documented = _cell(lim.documented or "")
        rows.append(f"| `{lim.id}` | {lim.mode} | {_outcome(lim)} | {documented} | {_cell(lim.summary)} |")
    return "\n".join(rows)


def modes_table(spec: Spec) -> str:
    rows = ["| mode | how an op runs | declared divergences from eager |", "|---|---|---|"]
    how = {
        "script": "`torch.jit.script` of a function with `with torch.autocast(...)` around the op",
        "trace": "`torch.jit.trace` of that function (casts recorded at trace time)",
        "compile": "`torch.compile` of that function (`--compile-backend`, default aot_eager)",
    }
    for mode in MODES:
        entry = spec.mode_divergences.get(mode)
        n = len(entry.divergences) if entry else 0
        rows.append(f"| {mode} | {how[mode]} | {n} |")
    return "\n".join(rows)


def jit_block(spec: Spec) -> str:
    """Everything between the markers (markers excluded), ending with a newline."""
    return (
        "Generated from `spec/jit.yaml` by `python -m reference_impl.cli.jit_tables`; "
        "do not edit by hand.\n\n" + limitations_table(spec) + "\n\n" + modes_table(spec) + "\n"
    )


def extract_block(text: str) -> str | None:
    """The text between the markers in ``text``, or None when the markers are absent."""
    m = re.search(re.escape(START) + r"\n(.*?)" + re.escape(END), text, flags=re.S)
    return m.group(1) if m else None


def main() -> int:
    sys.stdout.write(START + "\n" + jit_block(load_installed_spec()) + END + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
