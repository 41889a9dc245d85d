"""pytest -p examples.vendor_backend.plugin: make the acme device usable before the suite starts."""

import examples.vendor_backend.torch_acme  # noqa: F401
