"""``python -m realbugs.show ID`` (``tests/`` on ``PYTHONPATH``): run an entry's witness on the
installed torch, then install its replay and run the witness again, in this one process.
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
    from .registry import registered

    REPLAYS, WITNESSES = registered()

    entry = BY_ID[entry_id]
    assert entry.witness is not None, f"{entry_id} has no witness"
    witness = WITNESSES[entry.witness]
    out: dict[str, object] = {"clean": witness()}
    if entry.replay is not None:
        torch._dynamo.reset()
        torch.clear_autocast_cache()
        REPLAYS[entry.replay]()
        out["replayed"] = witness()
    return out


def main() -> int:
    warnings.simplefilter("ignore")
    print(json.dumps(observe(sys.argv[1])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
