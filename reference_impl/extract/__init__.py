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
- :mod:`.registrations`: ``TORCH_LIBRARY_IMPL`` blocks and the registration forms in them;
- :mod:`.build`: registrations to a :class:`~autocast_spec.model.DeviceSpec` and a file.

Nothing is guessed: a form the reader does not understand is a problem naming the
file, the line and the text.
"""
