"""Run each reproduction of docs/findings/ under each given Python (one per torch release) and
write what it prints, so docs/findings/README.md can say which releases still show each finding.

    python benchmarks/programs_findings.py --python .venv/bin/python --python /path/to/2.15/bin/python \
        --out benchmarks/programs_findings.txt

``--script NAME`` (repeatable) runs those scripts only; with ``--out`` an existing report, their
sections in it are replaced or added, the others kept (a new script, without running them all).

Each script runs in a fresh process with a time limit; its output is kept whole (the scripts print
eager's result next to the pass's, so the reader sees the difference, or that there is none)."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

FINDINGS = Path(__file__).resolve().parent.parent / "docs" / "findings"


def torch_version(python: str) -> str:
    code = "import torch; print(torch.__version__)"
    out = subprocess.run([python, "-c", code], capture_output=True, text=True)
    return out.stdout.strip() or f"(no torch: {out.stderr.strip().splitlines()[-1:]})"


def sections(text: str) -> dict[tuple[str, str], list[str]]:
    """A report's sections by (torch version, script name), in the report's order."""
    found: dict[tuple[str, str], list[str]] = {}
    key: tuple[str, str] | None = None
    for line in text.splitlines():
        head = re.match(r"== torch (\S+): (\S+\.py) \(", line)
        if head:
            key = (head[1], head[2])
            found[key] = []
        if key is not None:
            found[key].append(line)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", action="append", default=[], help="a Python with torch (repeatable)")
    parser.add_argument("--out", type=Path, default=None, help="write the report here too")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per script")
    parser.add_argument(
        "--script",
        action="append",
        default=[],
        help="only this script of docs/findings/ (repeatable); with --out, its sections of that report "
        "are replaced or added and the others kept",
    )
    args = parser.parse_args()
    pythons = [os.path.abspath(p) for p in args.python] or [sys.executable]
    scripts = sorted(FINDINGS.glob("*.py"))
    unknown = sorted(set(args.script) - {s.name for s in scripts})
    if unknown:
        parser.error(f"--script: no such script in {FINDINGS}: {', '.join(unknown)}")
    if args.script:
        scripts = [s for s in scripts if s.name in args.script]
    found: dict[tuple[str, str], list[str]] = {}
    for python in pythons:
        version = torch_version(python)
        for script in scripts:
            start = time.perf_counter()
            try:
                p = subprocess.run(
                    [python, str(script)], capture_output=True, text=True, timeout=args.timeout, cwd="/"
                )
                said = p.stdout.strip() or f"(exit {p.returncode}) {p.stderr.strip().splitlines()[-1:]}"
            except subprocess.TimeoutExpired:
                said = f"(cut after {args.timeout:.0f} s)"
            took = time.perf_counter() - start
            found[(version, script.name)] = [f"== torch {version}: {script.name} ({took:.0f} s)"]
            found[(version, script.name)] += [f"   {line}" for line in said.splitlines()]
            print(found[(version, script.name)][0], flush=True)
    if args.script and args.out is not None and args.out.is_file():
        found = {**sections(args.out.read_text()), **found}
    versions = list(dict.fromkeys(v for v, _ in found))
    text = "\n".join(
        line for key in sorted(found, key=lambda k: (versions.index(k[0]), k[1])) for line in found[key]
    )
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
