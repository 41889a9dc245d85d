"""``autocast-spec probe --device D``: write the installed torch's autocast for D as a spec file."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from autocast_spec.model import DeviceSpec

from ..harness.devices import VendorImportError, adopt_privateuse1, import_vendor
from ..probe.bundled import probe_with_bundled
from ..probe.device_spec import ProbedDevice, ProbeError, probed_data, probed_yaml
from .common import EXIT_OK, UsageError, add_import_option, import_modules, write_out
from .extract import one_device_file


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "probe",
        help="observe the installed torch's autocast on a device and write it as a spec",
        description="Observe the installed torch's autocast on DEVICE (dispatcher registrations, "
        "then each op's policy: real tensors where the device is present, FakeTensors "
        "otherwise) and print a device spec file ready for 'autocast-spec validate'. Facts that "
        "cannot be observed on this machine are taken from the bundled spec and named in the "
        "file's header (MAIA's policies; CUDA's dtype rules without a GPU).",
    )
    p.add_argument("--device", required=True, help="device to probe, e.g. cpu, cuda, xpu, mps, mtia")
    p.add_argument(
        "--table",
        action="store_true",
        help="print only the op -> policy table instead of a whole device spec",
    )
    add_import_option(
        p,
        "import MODULE first: the package that registers an out-of-tree backend "
        "(torch_xla, intel_extension_for_pytorch; a PrivateUse1 backend it leaves unnamed "
        "is named --device); repeatable",
    )
    p.add_argument(
        "--spec",
        type=Path,
        metavar="FILE",
        help="a device file for DEVICE (a vendor's, e.g. spec/vendors/torch_npu.yaml): the module its "
        "vendor block names is imported (with its environment), and what cannot be observed here "
        "(the dtype defaults, where torch.autocast disables itself without the device) is taken from it",
    )
    p.add_argument(
        "--every-dtype",
        action="store_true",
        help="observe each op under every supported lower dtype and write 'by_dtype' where the "
        "policy differs (by default: the device's default dtype only)",
    )
    p.add_argument("--policy-only", nargs=0, action=_RenamedToTable, help=argparse.SUPPRESS)
    p.add_argument("--format", choices=["yaml", "json"], default="yaml")
    p.add_argument("-o", "--output", type=Path, metavar="FILE", help="write here instead of stdout")
    p.set_defaults(run=run)


class _RenamedToTable(argparse.Action):
    """``probe --policy-only`` became ``probe --table`` (the suite's --policy-only means FakeTensors)."""

    def __call__(self, *args: object, **kwargs: object) -> None:
        raise UsageError(
            "autocast-spec probe --policy-only is now --table (print only the op -> policy table); "
            "--policy-only means FakeTensors in the suite"
        )


class _TerminalProgress:
    """One rewritten status line on stderr, only when stderr is a terminal."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.enabled = sys.stderr.isatty()

    def __call__(self, i: int, total: int, op: str) -> None:
        if self.enabled:
            sys.stderr.write(f"\r\033[Kprobing {self.device}: {i + 1}/{total} {op}")
            sys.stderr.flush()

    def done(self, probed: ProbedDevice, seconds: float) -> None:
        if self.enabled:
            sys.stderr.write(f"\r\033[Kprobed {self.device}: {len(probed.spec.ops)} ops in {seconds:.1f} s\n")
        for note in probed.borrowed:
            sys.stderr.write(f"note: not observed here: {note}\n")
        for op, why in probed.unresolved.items():
            sys.stderr.write(f"warning: no policy for {op}: {why} (listed under not_observed)\n")


def _given(args: argparse.Namespace) -> tuple[DeviceSpec, str] | None:
    """``--spec FILE``: its device (named ``--device``), its vendor's module imported."""
    if args.spec is None:
        return None
    ds = one_device_file(args.spec)
    if ds.device != args.device:
        raise UsageError(f"--spec {args.spec}: it describes {ds.device}, not --device {args.device}")
    if ds.vendor is not None:
        try:
            import_vendor(ds.vendor)
        except VendorImportError as e:
            raise UsageError(
                f"--spec {args.spec}: it describes {ds.vendor.described}, whose module "
                f"{ds.vendor.module!r} does not import: {e.why}"
            ) from None
    return ds, f"{args.spec} (torch {ds.torch_versions})"


def run(args: argparse.Namespace) -> int:
    import_modules(args.imports)
    given = _given(args)
    if (args.imports or given) and adopt_privateuse1(args.device):
        sys.stderr.write(f"note: the PrivateUse1 backend was unnamed; named {args.device}\n")
    progress = _TerminalProgress(args.device)
    start = time.perf_counter()
    try:
        probed = probe_with_bundled(args.device, progress=progress, every_dtype=args.every_dtype, given=given)
    except ProbeError as e:
        raise UsageError(f"--device {args.device}: {e}") from None
    progress.done(probed, time.perf_counter() - start)
    if args.table:
        table = probed.spec.policy_table()
        text = (
            json.dumps(table, indent=2)
            if args.format == "json"
            else "".join(f"{op}: {pol}\n" for op, pol in table.items())
        )
    elif args.format == "json":
        text = json.dumps(probed_data(probed), indent=2)
    else:
        text = probed_yaml(probed)
    if args.output:
        try:
            args.output.write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
        except OSError as e:
            raise UsageError(f"--output {args.output}: {e.strerror}") from None
    else:
        write_out(text)
    return EXIT_OK
