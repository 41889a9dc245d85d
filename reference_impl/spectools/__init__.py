"""Tools over the spec: read for the installed torch, diffed, laid out as a matrix, checked.

* :mod:`.installed_spec`: the spec loaded for the installed torch;
* :mod:`.specdiff`, :mod:`.specdiff_render`: ``autocast-spec diff``;
* :mod:`.matrix`, :mod:`.vendor_matrix`: ``autocast-spec matrix`` and the vendor table;
* :mod:`.catalog_checks`: the op catalog's samples and entry points, run.

The observer (``reference_impl/probe``) and the C++ reader (``reference_impl/extract``)
are spec tools too, each a package of its own.
"""
