"""``python -m realbugs.probe ID`` (``tests/`` on ``PYTHONPATH``): run an entry's probe on the
installed torch, then install its replay and run the probe again, in this one process.
Prints one JSON line ``{"clean": ..., "replayed": ...}`` (no ``replayed`` for entries that
torch itself still shows).
"""

from __future__ import annotations

import json
import sys
import warnings


def observe(entry_id: str) -> dict[str, object]:
    import torch

    from .corpus import BY_ID
    from .probes import PROBES
    from .replays import REPLAYS

    entry = BY_ID[entry_id]
    assert entry.probe is not None, f"{entry_id} has no probe"
    probe = PROBES[entry.probe]
    out: dict[str, object] = {"clean": probe()}
    if entry.replay is not None:
        torch._dynamo.reset()
        torch.clear_autocast_cache()
        REPLAYS[entry.replay]()
        out["replayed"] = probe()
    return out


def main() -> int:
    warnings.simplefilter("ignore")
    print(json.dumps(observe(sys.argv[1])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
