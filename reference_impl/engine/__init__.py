"""The policy engine: from the spec and one op call to the cast plan, and the oracle that applies it.

* :mod:`.policy`: :func:`~.policy.decide`, the plan (which arguments are cast to what, a
  dtype set or appended, a refusal) for one call under one autocast state;
* :mod:`.eligibility`: which tensors autocast may touch, and the weight test of the cast cache;
* :mod:`.oracle`: the plan applied explicitly, the kernel called below every Autocast key;
* :mod:`.signatures`, :mod:`.torch_registry`, :mod:`.dtypes`: op schemas, the installed
  torch's dispatcher, the dtype vocabulary.
"""
