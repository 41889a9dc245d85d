"""How the suite stops on a user's error: one line on stderr, exit code 2, no traceback."""

from __future__ import annotations

from typing import NoReturn

import pytest

EXIT_USAGE = 2  # the project's exit code for a user's error (as autocast-spec)


def usage_error(message: str) -> NoReturn:
    """Stop the run (before collection when called from pytest_configure)."""
    pytest.exit(f"usage error: {message}", returncode=EXIT_USAGE)
