"""What the suite, the probe and the spec tools share at run time, by concern.

* :mod:`.samples`: the op catalog's samples made into tensors and calls;
* :mod:`.devices`: tensors on a device, real or FakeTensors;
* :mod:`.state`: the thread's autocast state, set, snapshot and restored;
* :mod:`.calls`: calls synthesized from a schema, and intercepted below Autocast;
* :mod:`.compare`: one comparison of outputs (bitwise, or within a tolerance);
* :mod:`.surface`: autocast's public Python entry points called the way their role uses them.

The execution modes (script, trace, compile, export, AOTInductor) are :mod:`reference_impl.modes`.
"""
