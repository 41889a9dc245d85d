"""The closed vocabularies of the spec: what a field may say, as types.

The JSON Schema (``spec/autocast-spec.schema.json``) refuses any other value when a file is
validated; the model's fields carry these types, so a reader (and mypy) sees what a field
may hold. ``tests/test_spec_validate.py`` holds each against the schema's ``enum`` (:data:`SCHEMA`).
"""

from __future__ import annotations

from typing import Literal

UnsupportedAction = Literal["warn_and_disable", "error", "accepted"]
ClearedAt = Literal["outermost_exit", "every_exit"]
CacheKey = Literal["source", "source_and_dtype"]  # source: found whatever the dtype now is
ForeignFloatAction = Literal["error", "promote"]
InputKind = Literal["float32", "lower"]  # a run's floating inputs: float32, or the autocast dtype
CompiledMode = Literal["compile", "export", "aoti"]
Host = Literal["any", "avx2", "avx512"]  # the CPU capability a value divergence shows on
PassConfig = Literal["default", "emulate_precision_casts", "decomposed"]  # a mode's pass
JitMode = Literal["script", "trace", "compile", "export", "eager"]
JitOutcome = Literal["error", "ignored", "works", "differs", "crash"]
CompiledOutcome = Literal["raises", "graph_break"]  # what torch.compile does where not eager's
# an argument a validation entry gives a wrong value
CheckedArgument = Literal["device_type", "dtype", "enabled", "cache_enabled"]
WrongValue = Literal["torch_device", "unknown_string", "none", "float32", "float64", "int32", "string", "int"]
ArgumentOutcome = Literal["raises", "warns_and_disables", "default_dtype", "unsupported_dtype"]
# how an entry point is called; how a region object is used; what a region decorates
ArgumentForm = Literal[
    "keyword",
    "keyword_for_positional_only",
    "extra_positional",
    "unknown_keyword",
    "missing_argument",
    "repeated_argument",
    "swapped_arguments",
]
RegionForm = Literal[
    "with_as",
    "reused",
    "reentered",
    "enter_exit_methods",
    "exit_without_enter",
    "async_with",
    "class_as_region",
    "user_wrapper",
    "subclass",
]
DecoratorForm = Literal[
    "function",
    "lambda",
    "method",
    "staticmethod",
    "classmethod",
    "module",
    "class",
    "generator",
    "coroutine",
    "recursive",
    "tensor",
    "none",
    "bare",
    "classmethod_object",
]
FormName = Literal[ArgumentForm, RegionForm, DecoratorForm]
FormOutcome = Literal["canonical", "raises", "body_outside_region"]

# Each vocabulary and where the schema states it: a $defs entry, then property names ("items":
# the items of an array).
SCHEMA: dict[str, tuple[object, str]] = {
    "UnsupportedAction": (UnsupportedAction, "device_file.unsupported_dtype.action"),
    "ClearedAt": (ClearedAt, "rules_file.cache.cleared_at"),
    "CacheKey": (CacheKey, "rules_file.cache.key"),
    "ForeignFloatAction": (ForeignFloatAction, "rules_file.promote.foreign_float.action"),
    "InputKind": (InputKind, "divergence.inputs"),
    "CompiledMode": (CompiledMode, "value_divergence.mode"),
    "Host": (Host, "value_divergence.condition.host"),
    "PassConfig": (PassConfig, "value_divergence.condition.config"),
    "JitMode": (JitMode, "limitation.mode"),
    "JitOutcome": (JitOutcome, "limitation.expect"),
    "CompiledOutcome": (CompiledOutcome, "under_compile.outcome"),
    "CheckedArgument": (CheckedArgument, "surface_file.validation.items.argument"),
    "WrongValue": (WrongValue, "surface_file.validation.items.value"),
    "ArgumentOutcome": (ArgumentOutcome, "surface_file.validation.items.outcome"),
    "FormName": (FormName, "surface_file.call_forms.items.form"),
    "FormOutcome": (FormOutcome, "surface_file.call_forms.items.outcome"),
}
