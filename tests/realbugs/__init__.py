"""A corpus of publicly reported autocast bugs, replayed to measure the conformance suite.

``corpus.yaml`` lists the reports (``corpus`` loads them), ``replays`` (and
``replays_more``) injects each into the installed torch, ``witnesses`` (and ``witnesses_more``)
shows each one's observable deviation, ``plugin`` installs one replay in a suite
subprocess (``AUTOCAST_REALBUG=<id>``), ``witness`` runs a witness with and without its
replay, ``harness`` runs everything and prints ``real bugs caught: K/N``.
``tests/test_realbugs.py`` runs them (marker ``realbugs``).
"""
