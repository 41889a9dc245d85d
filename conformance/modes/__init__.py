"""Execution modes: one op call run eagerly, through TorchScript (``script``, ``trace``) or
``torch.compile``, and the JIT/compiler scenarios of ``spec/jit.yaml``.

The words, each with one meaning:

* a **mode** is how a call runs: ``eager``, ``script``, ``trace``, ``compile``, ``export``,
  ``aoti`` (``--mode``, repeatable; ``--compile-backend`` for ``compile``);
* a **divergence** is a declared difference of one op's result in a mode from eager
  autocast: its dtypes (``mode_divergences``: ``spec/jit.yaml`` for TorchScript, trace and
  ``aot_eager``, ``spec/compiled.yaml`` for inductor, export and AOTInductor) or its values
  (``spec/compiled.yaml`` ``value_divergences``, which also declare a region program's
  values, by ``region:``);
* a **limitation** is an entry of ``spec/jit.yaml`` ``limitations``, and its **scenario**
  the small program that reproduces it.

Modules: :mod:`.plugin` (the options), :mod:`.run` (:func:`run_in_mode`, the documented
entry point), :mod:`.ops` (every catalogued op in a mode against eager), :mod:`.gradients`
(backward through a compiled region), :mod:`.export` and :mod:`.aoti` (exported programs and
AOTInductor packages), :mod:`.regions` (small multi-op regions compiled as one graph),
:mod:`.exceptions` (an exception escaping a region), :mod:`.scenarios` (the limitations).
"""

from __future__ import annotations

from .run import COMPILED_MODES, DEFAULT_COMPILE_BACKEND, MODES, run_in_mode

__all__ = ["COMPILED_MODES", "DEFAULT_COMPILE_BACKEND", "MODES", "run_in_mode"]
