"""The harness every category uses, learned once.

* :mod:`.case`: the one typed :class:`~.case.Case` (generic over the category's parameters; its
  test id is built from its typed fields), and the spec views the generators share (listed ops,
  catalogued ops, the sentinel op);
* :mod:`.category`: how a category declares itself, and the marker a test is parametrized by;
* :mod:`.inputs`: making a sample's inputs with an input mix;
* :mod:`.calls`: running a call natively and through the reference oracle, the cast plan
  decided once per call;
* :mod:`.intercept`: what arrives below the Autocast key, and the sentinel call;
* :mod:`.dispatcher`: what the installed torch's dispatcher says about ops;
* :mod:`.refusal`: inputs a host's kernels refuse, and devices where autocast does not act;
* :mod:`.state`: reading the thread's autocast state;
* :mod:`.divergences`: a mode's declared divergences from eager, dtypes and values;
* :mod:`.scenarios`: the small programs of the JIT/compiler limitations (``spec/jit.yaml``);
* :mod:`.verdict`: :func:`~.verdict.expect`, the one way a check states its expectation;
* :mod:`.hypothesis`: the Hypothesis settings of the suite.
"""
