"""A corpus of publicly reported autocast bugs, replayed to measure the conformance suite.

``corpus.yaml`` lists the reports (``corpus`` loads them). By kind of bug, ``op_lists``,
``cache``, ``context``, ``autograd`` and ``compiled`` each hold the replays that inject
those reports into the installed torch and the witnesses that show each one's observable
deviation (``registry``: the decorators and what witnesses share). ``plugin`` installs one
replay in a suite subprocess (``AUTOCAST_REALBUG=<id>``), ``show`` runs a witness with and
without its replay, ``harness`` runs everything and prints ``real bugs caught: K/N``.
``tests/test_realbugs.py`` runs them (marker ``realbugs``).
"""
