"""The suite's categories: one module each, holding its cases, procedure and expectation, and
declaring itself (``CATEGORY``): what it checks, its checks and generators, the policies it owes.

Per op and policy: ``op_policy``, ``numerics``, ``eligibility``, ``registration``, ``unlisted``,
``promote``, ``banned``, ``opt_dtype``. The context and its state: ``context``, ``threads``,
``cache``, ``transitions``. Gradients and transforms: ``autograd``, ``functorch``. Extension
points: ``custom_function``, ``custom_op``. The public Python surface: ``python_surface``,
``call_forms`` (every way of calling, entering and decorating with it, and its misuses). The
execution modes against eager: ``modes`` (every op), ``regions`` (multi-op region programs),
``mode_gradients``, ``mode_exceptions``, ``jit`` (the limitations of spec/jit.yaml). The
suite on itself: ``coverage``. ``conformance.registry`` finds them.
"""
