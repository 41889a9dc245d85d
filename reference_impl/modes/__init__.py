"""The execution modes: running calls and programs eagerly, through TorchScript, a trace,
``torch.compile``, ``torch.export`` or an AOTInductor package.

* :mod:`.run`: one op call in a mode (:func:`~.run.run_in_mode`, the :class:`~.run.Mode` names),
  and the generated source the modes read;
* :mod:`.batch`: many op calls compiled as one program, a pass's configuration
  (:class:`~.batch.Pass`), and the run's inductor cache directory;
* :mod:`.export`: a batch exported strictly or not, its autocast regions read from the graph;
* :mod:`.aoti`: a batch compiled ahead of time into an AOTInductor package.

The suite's categories judge what these run (``conformance/categories/modes.py``,
``regions.py``, ``mode_gradients.py``, ``mode_exceptions.py``, ``jit.py``).
"""
