"""The spec package with torch unimportable: import it, load and validate the bundled spec.

Run by tests/test_spec_torch_free.py as ``PYTHONPATH=ROOT python tests/helpers/torch_free_load.py``
(ROOT holds ``autocast_spec/`` and ``spec/``). Every import of ``torch`` raises
ImportError. Prints one JSON object: where ``autocast_spec`` came from, the top-level
modules importing it and loading the spec added to ``sys.modules``, a summary of the
loaded spec, the problems a planted bad device file gets, and the error that stopped
it (null when none).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import json
import pkgutil
import sys
import tempfile
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

RELEASE = "2.13.0"
# An unknown policy on line 7: the schema check must name the file and line without torch.
BAD_DEVICE = """kind: device
device: npu
extends: cuda
dispatch_key: AutocastPrivateUse1
builtin: false
torch: ">=2.11,<2.16"
ops:
  lower_precison_fp: [aten::mm]
"""


class NoTorch(importlib.abc.MetaPathFinder):
    """Refuses ``torch`` and its submodules, as on a machine where torch is not installed."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: Any = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname.split(".")[0] == "torch":
            raise ImportError(f"torch is not importable here (asked for {fullname})")
        return None


def load_everything() -> dict[str, Any]:
    package = importlib.import_module("autocast_spec")
    for info in pkgutil.walk_packages(package.__path__, "autocast_spec."):
        importlib.import_module(info.name)
    loader = importlib.import_module("autocast_spec.loader")
    versions = importlib.import_module("autocast_spec.versions")
    problems = importlib.import_module("autocast_spec.problems")
    facts = versions.TorchFacts(RELEASE)
    spec = loader.load_spec(installed=facts)
    planted: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        bad = Path(tmp) / "npu.yaml"
        bad.write_text(BAD_DEVICE, encoding="utf-8")
        try:
            loader.load_spec([bad], installed=facts)
        except problems.SpecError as e:
            planted = [f"{Path(p.file).name}:{p.line}: {p.message}" for p in e.problems]
    return {
        "file": package.__file__,
        "spec": {"torch_version": spec.torch_version, "devices": sorted(spec.devices), "ops": len(spec.ops)},
        "planted": planted,
    }


def main() -> int:
    sys.meta_path.insert(0, NoTorch())
    before = set(sys.modules)
    out: dict[str, Any] = {"error": None}
    try:
        out.update(load_everything())
    except Exception as e:
        out["error"] = "".join(traceback.format_exception_only(type(e), e)).strip()
        out["traceback"] = traceback.format_exc()
    out["imported"] = sorted({name.split(".")[0] for name in set(sys.modules) - before})
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
