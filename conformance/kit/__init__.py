"""The harness every category uses, learned once.

* :mod:`.case`: the typed :class:`~.case.Case` a generated test is parametrized with (its
  parameters are typed fields, and its test id is built from them), and the spec views the
  generators share (listed ops, catalogued ops, the sentinel op);
* :mod:`.inputs`: making a sample's inputs with an input mix;
* :mod:`.calls`: running a call natively and through the reference oracle, the cast plan
  decided once per call;
* :mod:`.intercept`: what arrives below the Autocast key, and the sentinel call;
* :mod:`.dispatcher`: what the installed torch's dispatcher says about ops;
* :mod:`.refusal`: inputs a host's kernels refuse, and devices where autocast does not act;
* :mod:`.state`: reading the thread's autocast state;
* :mod:`.verdict`: :func:`~.verdict.expect`, the one way a check states its expectation;
* :mod:`.hypothesis`: the Hypothesis settings of the suite.
"""
