"""Mutation testing of the conformance suite: deliberate deviations it must catch.

``catalogue`` lists the mutants, ``kernels`` builds the wrong Autocast kernels,
``plugin`` installs one mutant in a suite subprocess, ``harness`` runs a selection
with and without a mutant. ``tests/test_mutation.py`` runs them all (marker
``mutation``); ``python -m mutation.harness`` (from ``tests/``) prints the table.
"""
