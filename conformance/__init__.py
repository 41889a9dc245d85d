"""The conformance suite (a pytest plugin), certification and the ``autocast-spec`` command.

Everything here needs torch. Where ``import torch`` itself fails (a backend that loads itself
on ``import torch`` through an entry point, and whose runtime is absent), the process stops
here with one message and exit code 2, before pytest or ``autocast-spec`` prints a traceback.
Where such a backend is installed, ``import torch`` is first tried in a child process: a native
abort while it loads (torch-npu 2.14.0 in the registry's torch 2.14.0) would end this process
with no message of ours.
"""

from __future__ import annotations

import os
import sys

from autocast_spec.imports import AUTOLOAD_OFF, autoload_failure, autoloading, import_ends_process

if "torch" not in sys.modules and autoloading() and not os.environ.get("PYTEST_XDIST_WORKER"):
    _ended = import_ends_process()
    if _ended is not None:
        sys.stderr.write(
            f"error: {_ended}; a backend loads itself on `import torch` ({', '.join(autoloading())}): "
            f"start Python with {AUTOLOAD_OFF} to keep torch from loading it\n"
        )
        raise SystemExit(2)

try:
    import torch  # noqa: F401
except Exception as _e:
    sys.stderr.write(f"error: {autoload_failure(_e)}\n")
    raise SystemExit(2) from None
