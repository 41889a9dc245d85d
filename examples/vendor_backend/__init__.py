"""acme: a compiled PrivateUse1 backend, the template a vendor copies (docs/vendor-guide.md).

Importing this package loads nothing; ``torch_acme`` does (the pytest plugin imports it).
"""
