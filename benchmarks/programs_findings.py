"""Run each reproduction of docs/findings/ under each given Python (one per torch release) and
write what it prints, so docs/findings/README.md can say which releases still show each finding.

    python benchmarks/programs_findings.py --python .venv/bin/python --python /path/to/2.15/bin/python \
        --out benchmarks/programs_findings.txt

Each script runs in a fresh process with a time limit; its output is kept whole (the scripts print
eager's result next to the pass's, so the reader sees the difference, or that there is none)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

FINDINGS = Path(__file__).resolve().parent.parent / "docs" / "findings"


def torch_version(python: str) -> str:
    code = "import torch; print(torch.__version__)"
    out = subprocess.run([python, "-c", code], capture_output=True, text=True)
    return out.stdout.strip() or f"(no torch: {out.stderr.strip().splitlines()[-1:]})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", action="append", default=[], help="a Python with torch (repeatable)")
    parser.add_argument("--out", type=Path, default=None, help="write the report here too")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per script")
    args = parser.parse_args()
    pythons = [os.path.abspath(p) for p in args.python] or [sys.executable]
    lines: list[str] = []
    for python in pythons:
        version = torch_version(python)
        for script in sorted(FINDINGS.glob("*.py")):
            start = time.perf_counter()
            try:
                p = subprocess.run(
                    [python, str(script)], capture_output=True, text=True, timeout=args.timeout, cwd="/"
                )
                said = p.stdout.strip() or f"(exit {p.returncode}) {p.stderr.strip().splitlines()[-1:]}"
            except subprocess.TimeoutExpired:
                said = f"(cut after {args.timeout:.0f} s)"
            took = time.perf_counter() - start
            lines.append(f"== torch {version}: {script.name} ({took:.0f} s)")
            lines += [f"   {line}" for line in said.splitlines()]
            print(lines[-1 - len(said.splitlines())], flush=True)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out is not None:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
