"""Vendor certification: expectations files, isolated runs, the certification bundle."""
