"""The ``autocast-spec`` command line."""
