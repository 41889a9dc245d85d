from __future__ import annotations

import warnings

import pytest

from reference_impl.spec.loader import load_spec
from reference_impl.spec.model import Spec

warnings.filterwarnings("ignore", message="Failed to initialize NumPy")


@pytest.fixture(scope="session")
def spec() -> Spec:
    return load_spec()
