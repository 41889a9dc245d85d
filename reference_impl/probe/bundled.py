"""The bundled spec a probe fills its unobservable facts from, in one place for ``probe`` and ``diff``.

The bundled spec read for the installed torch; when no bundled spec covers the
installed torch, the one read for the nearest release it covers, and the probe's
notes name that release.
"""

from __future__ import annotations

from dataclasses import dataclass

from autocast_spec.files import device_torch_ranges
from autocast_spec.model import DeviceSpec
from autocast_spec.problems import SpecError
from autocast_spec.versions import nearest_covered_version

from ..engine.torch_registry import installed_torch_version, parse_release
from ..spectools.installed_spec import load_installed_spec
from .device_spec import ProbedDevice, Progress, probe_device


@dataclass(frozen=True)
class BundledDevice:
    """A bundled device spec, and the torch release it was read for."""

    spec: DeviceSpec
    torch_version: str
    installed: str

    @property
    def source(self) -> str:
        """How the probe's notes name it: the release too when it is not the installed one."""
        if parse_release(self.torch_version)[:2] == parse_release(self.installed)[:2]:
            return "the bundled spec"
        return (
            f"the bundled spec for torch {self.torch_version}, the nearest release it covers "
            f"(none covers torch {self.installed})"
        )


def bundled_device(device: str) -> BundledDevice | None:
    """The bundled spec's entry for ``device`` (installed torch, else the nearest covered version)."""
    installed = installed_torch_version()
    version: str | None = installed
    try:
        spec = load_installed_spec(torch_version=installed, check_registry=False)
    except SpecError:
        version = nearest_covered_version(device_torch_ranges(), installed)
        if version is None:
            return None
        try:
            spec = load_installed_spec(torch_version=version, check_registry=False)
        except SpecError:
            return None
    ds = spec.devices.get(device)
    return BundledDevice(ds, version, installed) if ds is not None and version else None


def probe_with_bundled(
    device: str,
    progress: Progress | None = None,
    every_dtype: bool = False,
    given: tuple[DeviceSpec, str] | None = None,
) -> ProbedDevice:
    """Probe ``device``, filling what cannot be observed here from :func:`bundled_device`, or from
    ``given`` (a device spec and its file: ``probe --spec FILE``)."""
    if given is not None:
        return probe_device(
            device, given[0], progress=progress, bundled_from=given[1], every_dtype=every_dtype
        )
    bundled = bundled_device(device)
    if bundled is None:
        return probe_device(device, None, progress=progress, every_dtype=every_dtype)
    return probe_device(
        device, bundled.spec, progress=progress, bundled_from=bundled.source, every_dtype=every_dtype
    )
