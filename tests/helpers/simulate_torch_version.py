"""Make the installed torch report another release (``-p helpers.simulate_torch_version``).

Loaded as a pytest plugin, or imported, it sets ``torch.__version__`` to
``$SIMULATED_TORCH_VERSION`` (default 2.99.0): a torch the bundled spec does not
cover, with the operators and Autocast kernels of the torch really installed.
"""

from __future__ import annotations

import os

import torch
from torch.torch_version import TorchVersion

SIMULATED = os.environ.get("SIMULATED_TORCH_VERSION", "2.99.0")
torch.__version__ = TorchVersion(SIMULATED)  # type: ignore[assignment]
