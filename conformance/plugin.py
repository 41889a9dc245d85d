"""pytest plugin: ``pytest conformance --backend <device>`` (built out in conformance/)."""
