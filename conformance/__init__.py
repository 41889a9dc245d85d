"""The conformance suite (a pytest plugin), certification and the ``autocast-spec`` command.

Everything here needs torch. Where ``import torch`` itself fails (a backend that loads itself
on ``import torch`` through an entry point, and whose runtime is absent), the process stops
here with one message and exit code 2, before pytest or ``autocast-spec`` prints a traceback.
"""

from __future__ import annotations

import sys

from autocast_spec.imports import autoload_failure

try:
    import torch  # noqa: F401
except Exception as _e:
    sys.stderr.write(f"error: {autoload_failure(_e)}\n")
    raise SystemExit(2) from None
