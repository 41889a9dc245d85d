"""What the suite, the probe and the spec tools share at run time, by concern.

* :mod:`.samples`: the op catalog's samples made into tensors and calls;
* :mod:`.devices`: tensors on a device, real or FakeTensors;
* :mod:`.state`: the thread's autocast state, set, snapshot and restored;
* :mod:`.calls`: calls synthesized from a schema, and intercepted below Autocast;
* :mod:`.compare`: one comparison of outputs (bitwise, or within a tolerance).
"""
