"""Generated autocast programs (issue 37): a grammar, a renderer and a runner.

* :func:`programs` (:mod:`.strategies`): Hypothesis strategies drawing a :class:`Program`
  (:func:`drawn_programs`: the first n of a seed, for campaigns)
  (:mod:`.tree`) from the spec: ops and policies from the catalog and the device file
  (:mod:`.menu`), autocast entry points from the Python surface (:mod:`.grammar`);
* :func:`features`: the grammar features a program uses (:mod:`.features`);
* :func:`script_for`: a program and a pass as a standalone script (:mod:`.script`,
  :mod:`.render`, with the code every script carries: :mod:`.script_code`, :mod:`.pass_code`);
* :func:`run`: the script run eagerly and through one of :data:`PASSES`, as a :class:`Record`
  (:mod:`.records`; :func:`shape_of`: an error's kind, what two errors are compared by);
  :func:`program_ops`: the aten overloads a program calls (:mod:`.runner`).

The verdict (what must hold between eager and a pass) is not here: the suite's category does it.
"""

from __future__ import annotations

from .features import features, grammar_features
from .grammar import Available, Grammar, Limits
from .passes import PASSES, Pass
from .records import (
    EAGER_ERROR,
    NOT_APPLICABLE,
    OK,
    PASS_ERROR,
    AutocastState,
    CallResult,
    NotApplicable,
    Output,
    Record,
    Side,
    shape_of,
)
from .runner import ProgramBug, ValueGaps, program_ops, run, script_for
from .strategies import drawn_programs, programs
from .tree import Program

__all__ = [
    "EAGER_ERROR",
    "NOT_APPLICABLE",
    "OK",
    "PASSES",
    "PASS_ERROR",
    "AutocastState",
    "Available",
    "CallResult",
    "Grammar",
    "Limits",
    "NotApplicable",
    "Output",
    "Pass",
    "Program",
    "ProgramBug",
    "Record",
    "Side",
    "ValueGaps",
    "drawn_programs",
    "features",
    "grammar_features",
    "program_ops",
    "programs",
    "run",
    "script_for",
    "shape_of",
]
