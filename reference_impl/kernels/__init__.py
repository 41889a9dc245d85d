"""The reference autocast: the spec's policy run for a whole program, and the cast report.

* :mod:`.reference_autocast`: ``reference_impl.autocast``, the context manager and its kernels;
* :mod:`.reference_dispatch`, :mod:`.device_kernels`: where its kernels are registered;
* :mod:`.fast_kernels` (with ``csrc/``): the C++ kernels that apply memoized plans;
  :mod:`.plan_memo`: the memo; :mod:`.weight_cache`: the weight-cast cache;
* :mod:`.trace`: ``reference_impl.trace_casts``; :mod:`.cast_report`: its records summed up.
"""
