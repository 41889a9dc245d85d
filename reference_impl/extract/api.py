"""One call for ``autocast-spec extract`` and the ``extract:`` side of ``diff``."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from autocast_spec.model import DeviceSpec, SourceForms

from .build import assemble, device_name, registered_keys, select
from .output import ExtractedSpec, to_spec
from .scan import ExtractError, installed_autocast_header, problems_of, scan


def extract(
    sources: Sequence[Path],
    torch_version: str,
    device: str | None = None,
    every_device: bool = False,
    defines: Sequence[str] = (),
    dtypes_from: str | None = None,
    header: Path | None = None,
    forms: SourceForms | None = None,
    dtypes_of: tuple[DeviceSpec, str] | None = None,
) -> list[ExtractedSpec]:
    """The device specs ``sources`` state, for ``torch_version``.

    One device: ``device``, or the only one registered; ``every_device`` (without
    ``device``): all of them. ``header``: the ``ATen/autocast_mode.h`` to read when the
    sources hold none (default: the installed torch's). ``forms``: the vendor's own registration
    forms (``vendor.source_forms`` of its spec file); ``dtypes_of``: the device (and its file) whose
    dtype defaults the specs take. Raises :class:`ExtractError`
    (one line per problem).
    """
    if header is not None and not header.is_file():
        raise ExtractError([f"--header {header}: no such file"])
    s = scan(list(sources), defines, header or installed_autocast_header(), forms)
    problems = problems_of(s)
    if problems:
        raise ExtractError([str(p) for p in problems])
    keys = registered_keys(s)
    if every_device and device is None and keys:
        picks = [(k, device_name(k)) for k in keys]
    else:
        picks = [select(s, device)]
    return [to_spec(s, assemble(s, key, name), torch_version, dtypes_from, dtypes_of) for key, name in picks]


__all__ = ["ExtractError", "ExtractedSpec", "extract"]
