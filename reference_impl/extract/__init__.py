"""Read autocast registrations from C++ source and state them as a device spec.

``autocast-spec extract`` (``reference_impl/cli/extract.py``) drives it. The layers,
each torch-free (the installed torch is only *located*, to find its
``ATen/autocast_mode.h``):

- :mod:`.lexer`: C++ text to tokens with file and line; logical lines for directives;
- :mod:`.macros`: the macro table and function-like/object-like expansion (``#``, ``##``,
  ``__VA_ARGS__``);
- :mod:`.conditions`: ``#if`` expressions judged true, false or undecidable;
- :mod:`.preprocess`: directives, includes, conditional blocks; tokens carry the
  undecidable conditions around them;
- :mod:`.scan`: source files and trees read, every Autocast registration in them and the problems;
- :mod:`.units`: a unit's registration blocks (``TORCH_LIBRARY_IMPL``, ``m.impl`` in
  ``TORCH_LIBRARY[_FRAGMENT]``, a vendor's own block macros);
- :mod:`.outside`: what lies outside the blocks (a registration there, a stray ``}``);
- :mod:`.statements`: ordinary C++ statements in a block, which register nothing;
- :mod:`.registrations`: the statements of a block read as registrations;
- :mod:`.forms`: the registration forms, one statement at a time;
- :mod:`.build`: registrations to a :class:`~autocast_spec.model.DeviceSpec`;
- :mod:`.output`: an extracted device as a spec file, its dtypes from the bundled spec;
- :mod:`.api`: one call for ``autocast-spec extract`` and the ``extract:`` side of ``diff``.

Nothing is guessed: a form the reader does not understand is a problem naming the
file, the line and the text.
"""
