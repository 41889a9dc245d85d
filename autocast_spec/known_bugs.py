"""A known bug: a bug of the torch releases (or of a vendor's release) it names, declared so the
generated check it shows in reports it as an xfail with its source, never as a pass.

Declared under ``known_bugs`` in ``spec/rules.yaml`` (torch's) or a vendor's device file (the
vendor's own): the check, what it observes instead of the rule, the releases, and where it
shows (devices, ops, a generated program's features).
"""

from __future__ import annotations

from dataclasses import dataclass

from .common import SourceLoc

PLACES = ("{device}", "{dtype}", "{default_dtype}")
"""What an observation may leave to the case: a bug of torch's Python surface shows the same on
every device, naming the device, the region's dtype and the device's default dtype."""


@dataclass(frozen=True)
class KnownBug:
    """A bug of the torch releases it names, declared so a generated check reports it as an xfail.

    The rule stays what autocast should do; ``observed`` is what the affected releases do
    instead, in the check's own words. A backend matching the rule passes, one matching
    ``observed`` is an xfail with the reason, anything else fails.
    """

    id: str
    check: str  # the generated check it shows up in (conformance.registry.all_checks())
    observed: tuple[str, ...]  # each an observation the bug gives (in the check's words; see PLACES)
    reason: str
    source: str  # where it was reported
    torch_versions: str
    loc: SourceLoc
    devices: tuple[str, ...] = ()  # empty: every device
    seen_on: str = ""  # a vendor's bug with no public report: the release it was observed on
    ops: tuple[str, ...] = ()  # empty: every op
    features: frozenset[str] = frozenset()  # a generated program's features it needs (empty: none)
    reproduction: str = ""  # docs/findings/<script>.py: a standalone reproduction

    def explains(
        self,
        check: str,
        device: str,
        observed: str,
        op: str | None = None,
        features: frozenset[str] = frozenset(),
        dtypes: tuple[str, str] = ("", ""),
    ) -> bool:
        """Does this bug account for ``observed`` in ``check`` on ``device`` (for ``op``, in a
        generated program holding ``features``; ``dtypes``: the case's autocast dtype and the
        device's default one, for the observations' places)?"""
        where = (not self.devices or device in self.devices) and (not self.ops or op in self.ops)
        if self.check != check or not where or not self.features <= features:
            return False
        values = {"{device}": device, "{dtype}": dtypes[0], "{default_dtype}": dtypes[1]}
        return observed in (_filled(o, values) for o in self.observed)

    @property
    def cited(self) -> str:
        """Its source, or for a vendor's unreported bug the release it was seen on."""
        return self.source if self.source != "none" else f"no public report; seen on {self.seen_on}"


def _filled(observed: str, values: dict[str, str]) -> str:
    for place, value in values.items():
        observed = observed.replace(place, value)
    return observed
