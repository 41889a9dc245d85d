"""What ``torch.autocast`` does with dtypes on a device: the rule for a dtype it lacks, and a
backend that has no autocast at all (``no_autocast``)."""

from __future__ import annotations

from dataclasses import dataclass

from .common import SourceLoc

LOWER_DTYPES = ("float16", "bfloat16")  # the dtypes autocast lowers to: what the suite tests


@dataclass(frozen=True)
class UnsupportedDtypeRule:
    """What ``torch.autocast(device, dtype=...)`` does for a dtype the device lacks."""

    action: str  # "warn_and_disable" | "error"
    message: str  # a regular expression the warning or error must match; {device}: the device's name

    def text(self, device: str) -> str:
        """The message for ``device`` (a renamed PrivateUse1 backend's warning names it)."""
        return self.message.replace("{device}", device)


@dataclass(frozen=True)
class NoAutocast:
    """A backend without autocast (its file's ``no_autocast``): ``torch.autocast`` warns and runs
    every op as without autocast; switched on directly (``torch.set_autocast_enabled``), an op
    falls through its Autocast key (``fallthrough``) or raises ``message`` (``error``)."""

    reason: str  # why, with its source
    direct_enabling: str  # "fallthrough" | "error"
    loc: SourceLoc
    message: str = ""  # direct_enabling error: a regular expression; {device}: the device's name

    def text(self, device: str) -> str:
        return self.message.replace("{device}", device)
