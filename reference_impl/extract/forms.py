"""The registration forms, one statement at a time.

Known forms (after the sources' own macros are expanded):

- ``KERNEL_<DEV>(op, policy)``, ``KERNEL_<DEV>(op, overload, policy)``, ``KERNEL_<DEV>2(op,
  overload, policy)``; generic ``KERNEL(DeviceType, ...)``, ``KERNEL1``/``KERNEL2``;
- ``KERNEL_DIFFERENT_REDISPATCH_SIGNATURE[_<DEV>]([DeviceType,] fn, "name", sig, sig, policy)``;
- ``m.impl(NAME, &WrapFunction<CastPolicy::P, DeviceType, ...>::type::call)``;
- ``m.impl(NAME, TORCH_FN(fn))`` and the like: a kernel of its own, read by
  :mod:`.registrations` (banned when its body only raises);
- ``m.impl(NAME, torch::CppFunction::makeFallthrough())`` and ``m.fallback(...)`` of the same.

``NAME`` is ``TORCH_SELECTIVE_NAME("aten::op")`` or string literals. The ``KERNEL*``
macros are read by their meaning, not expanded (their definitions in
``ATen/autocast_mode.h`` go through macros of c10 that are not read).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from autocast_spec.model import Policy, PolicyWrapper

from .lexer import Token, spell, string_value

ByDtype = tuple[tuple[str, Policy | None], ...]
_FAMILY = re.compile(r"^KERNEL(?:_(?P<dev>[A-Z][A-Z0-9]*?))?(?P<two>[12])?$")
_REDISPATCH = re.compile(r"^KERNEL_DIFFERENT_REDISPATCH_SIGNATURE(?:_(?P<dev>[A-Z][A-Z0-9]*))?$")
# registration macros whose meaning is read; the C10/torch API macros read as they stand
TORCH_API = frozenset(
    {"TORCH_LIBRARY_IMPL", "TORCH_LIBRARY", "TORCH_LIBRARY_FRAGMENT", "TORCH_SELECTIVE_NAME", "TORCH_FN",
     "TORCH_CHECK", "TORCH_CHECK_NOT_IMPLEMENTED", "TORCH_INTERNAL_ASSERT", "AT_ERROR", "ATEN_FN",
     "ATEN_FN2", "ADD_NS"}
)  # fmt: skip
CAST_POLICIES = tuple(p.value for p in Policy if p is not Policy.BANNED)
_DEVICE_SUFFIX = {"PRIVATEUSEONE": "privateuse1"}
# c10::DeviceType's names, as the KERNEL_<DEV> macros spell them
_DEVICE_TYPES = frozenset(
    {"CPU", "CUDA", "MKLDNN", "OPENGL", "OPENCL", "IDEEP", "HIP", "FPGA", "MAIA", "XLA", "VULKAN", "METAL",
     "XPU", "MPS", "META", "HPU", "VE", "LAZY", "IPU", "MTIA", "PRIVATEUSEONE"}
)  # fmt: skip
# the devices torch names itself: a PrivateUse1 backend cannot take one of these names
# (torch.utils.rename_privateuse1_backend refuses them)
IN_TREE_DEVICES = frozenset(d.lower() for d in _DEVICE_TYPES if d != "PRIVATEUSEONE")


def is_registration_macro(name: str) -> bool:
    """``KERNEL``, ``KERNEL2``, ``KERNEL_CUDA``, ``KERNEL_MPS2``, ``KERNEL_DIFFERENT_REDISPATCH_*``."""
    m = _FAMILY.match(name) or _REDISPATCH.match(name)
    return bool(m) and (m.group("dev") is None or m.group("dev") in _DEVICE_TYPES)  # type: ignore[union-attr]


def device_of_key(key: str) -> str:
    """``AutocastCUDA`` -> ``cuda``; plain ``Autocast`` is CUDA's key (its old name)."""
    suffix = key.removeprefix("Autocast")
    return "cuda" if suffix == "" else suffix.lower()


def device_of_type(tokens: list[Token]) -> str | None:
    """``c10::DeviceType::CUDA``, ``DeviceType::PrivateUse1``, ``at::kCUDA`` -> ``cuda``/``privateuse1``."""
    ids = [t for t in tokens if t.kind == "id"]
    if not ids or any(t.kind not in ("id",) and t.text != "::" for t in tokens):
        return None
    last = ids[-1].text
    if len(ids) >= 2 and ids[-2].text == "DeviceType":
        return last.lower()
    if re.match(r"^k[A-Z]", last):
        return last[1:].lower()
    return None


@dataclass(frozen=True)
class Form:
    """What one statement registers. ``policy`` None with ``kernel``: a kernel of its own."""

    op: str
    policy: Policy | None = None
    device: str | None = None  # the DeviceType the kernel casts for
    kernel: str | None = None  # a function registered directly (banned or custom)
    fallthrough: bool = False
    unreadable: str | None = None  # registered, but its kernel is no form whose policy can be read: why
    where: str = ""  # the op's name in the source (a list item in a header, for AT_FORALL lists)
    by_dtype: ByDtype = ()  # (dtype, policy) where it is not ``policy`` under that dtype (None: uncast)


class FormError(ValueError):
    def __init__(self, at: Token, message: str) -> None:
        super().__init__(f"{at.where}: {message}")
        self.at, self.message = at, message


def split_args(tokens: list[Token]) -> list[list[Token]]:
    """Top-level comma-separated arguments (parentheses, brackets and braces nest)."""
    args: list[list[Token]] = [[]]
    depth = 0
    for t in tokens:
        if t.text in ("(", "[", "{"):
            depth += 1
        elif t.text in (")", "]", "}"):
            depth -= 1
        elif t.text == "," and depth == 0:
            args.append([])
            continue
        args[-1].append(t)
    return args if tokens else []


def check_split(name: str, args: list[list[Token]], at: Token) -> None:
    """Each argument's brackets balance: else the call cannot be split into its arguments."""
    pairs = {")": "(", "]": "[", "}": "{"}
    for arg in args:
        stack: list[Token] = []
        for t in arg:
            if t.text in ("(", "[", "{"):
                stack.append(t)
            elif t.text in pairs:
                if not stack or stack[-1].text != pairs[t.text]:
                    raise FormError(
                        t,
                        f"cannot split the arguments of {name}: {t.text!r} closes nothing in {spell(arg)!r}",
                    )
                stack.pop()
        if stack:
            raise FormError(
                stack[-1],
                f"cannot split the arguments of {name}: {stack[-1].text!r} is never closed in {spell(arg)!r}",
            )


def _ident(arg: list[Token], what: str, at: Token) -> str:
    if len(arg) != 1 or arg[0].kind != "id":
        raise FormError(arg[0] if arg else at, f"{what} should be a name, not {spell(arg)!r}")
    return arg[0].text


def _policy(arg: list[Token], at: Token) -> Policy:
    name = arg[-1].text if arg and arg[-1].kind == "id" else spell(arg)
    if name not in CAST_POLICIES:
        raise FormError(
            arg[-1] if arg else at, f"unknown cast policy {name!r} (known: {', '.join(CAST_POLICIES)})"
        )
    return Policy(name)


def _strings(arg: list[Token], at: Token) -> str:
    toks = arg
    if toks and toks[0].text == "TORCH_SELECTIVE_NAME":
        toks = toks[2:-1]
    if not toks or any(t.kind != "str" for t in toks):
        raise FormError(at, f"the op name {spell(arg)!r} is not a string literal")
    return "".join(string_value(t) for t in toks)


def qualified(name: str, namespace: str) -> str:
    return name if "::" in name else f"{namespace}::{name}"


def kernel_macro(name: str, args: list[list[Token]], at: Token) -> Form:
    """A ``KERNEL*`` registration macro with its arguments."""
    check_split(name, args, at)
    if m := _REDISPATCH.match(name):
        dev = _suffix_device(m.group("dev"), args, at)
        rest = args if m.group("dev") else args[1:]
        if len(rest) != 5:
            raise FormError(at, f"{name} takes {5 if m.group('dev') else 6} arguments, got {len(args)}")
        name_at = rest[1][0].spelled_at if rest[1] else at.where
        return Form(qualified(_strings(rest[1], at), "aten"), _policy(rest[4], at), dev, where=name_at)
    m = _FAMILY.match(name)
    assert m is not None
    dev = _suffix_device(m.group("dev"), args, at)
    rest = args if m.group("dev") else args[1:]
    arity = {"1": (2,), "2": (3,)}.get(m.group("two") or "", (2, 3))
    if len(rest) not in arity:
        want = " or ".join(str(a) for a in arity)
        raise FormError(at, f"{name}: expected {want} arguments (op, [overload,] policy), got {len(rest)}")
    op = _ident(rest[0], "the op", at)
    overload = _ident(rest[1], "the overload", at) if len(rest) == 3 else ""
    full = f"aten::{op}" + (f".{overload}" if overload else "")
    return Form(full, _policy(rest[-1], at), dev, where=rest[0][0].spelled_at)


def _suffix_device(suffix: str | None, args: list[list[Token]], at: Token) -> str:
    if suffix:
        return _DEVICE_SUFFIX.get(suffix, suffix.lower())
    dev = device_of_type(args[0]) if args else None
    if dev is None:
        raise FormError(
            at, f"the device type {spell(args[0]) if args else ''!r} is not a DeviceType constant"
        )
    return dev


def impl_call(
    args: list[list[Token]], namespace: str, at: Token, wrappers: Mapping[str, PolicyWrapper] | None = None
) -> Form:
    """``m.impl(NAME, FN)``; a kernel whose policy cannot be read is a kernel of its own (``unreadable``).
    ``wrappers``: a vendor's kernel templates that take a policy per dtype (``vendor.source_forms``)."""
    check_split("m.impl", args, at)
    if len(args) < 2:
        raise FormError(at, "m.impl takes the op name and a kernel")
    op = qualified(_strings(args[0], at), namespace)
    fn = [t for a in args[1:] for t in (*a, Token("punct", ",", at.file, at.line))][:-1]
    texts = [t.text for t in fn]
    if "makeFallthrough" in texts:
        return Form(op, fallthrough=True)
    for template, wrapper in (wrappers or {}).items():
        if template in texts:
            return _wrapped(op, fn, texts.index(template), wrapper)
    if "WrapFunction" in texts:
        k = texts.index("WrapFunction")
        if k + 1 < len(fn) and fn[k + 1].text == "<":
            targs = split_args(_angle_args(fn, k + 1))
            if len(targs) >= 2 and "CastPolicy" in [t.text for t in targs[0]]:
                # a vendor's own WrapFunction may take no DeviceType (its casts are for its device):
                # then the block's key says the device
                return Form(op, _policy(targs[0], at), device_of_type(targs[1]))
        return Form(op, unreadable=f"a WrapFunction without CastPolicy::POLICY, DeviceType: {_short(fn)}")
    name = function_name(fn)
    if name is None:
        return Form(
            op, unreadable=f"the kernel {_short(fn)} is not a function name, TORCH_FN(...) or WrapFunction"
        )
    return Form(op, kernel=name)


def _wrapped(op: str, fn: list[Token], k: int, wrapper: PolicyWrapper) -> Form:
    """``&CPU_WrapFunction<DtypeCastPolicy::A, DtypeCastPolicy::B, ...>::type::call``: the leading
    template arguments are the policy under each of ``wrapper.dtypes``; the first dtype's policy (or
    the first that casts) is the op's, the others differ by dtype."""
    name = fn[k].text
    targs = split_args(_angle_args(fn, k + 1)) if k + 1 < len(fn) and fn[k + 1].text == "<" else []
    if len(targs) < len(wrapper.dtypes):
        why = f"{name} without a policy for each of {', '.join(wrapper.dtypes)}: {_short(fn)}"
        return Form(op, unreadable=why)
    per_dtype: list[tuple[str, Policy | None]] = []
    for dtype, targ in zip(wrapper.dtypes, targs[: len(wrapper.dtypes)], strict=True):
        constant = targ[-1].text if targ else ""
        if constant not in wrapper.policies:
            known = ", ".join(wrapper.policies)
            why = f"{name}'s policy {spell(targ)!r} under {dtype} is none the vendor file names ({known})"
            return Form(op, unreadable=why)
        per_dtype.append((dtype, wrapper.policies[constant]))
    policy = next((p for _, p in per_dtype if p is not None), None)
    if policy is None:
        return Form(op, unreadable=f"{name} passes it uncast under every dtype: {_short(fn)}")
    return Form(op, policy, by_dtype=tuple((dt, p) for dt, p in per_dtype if p != policy))


def _short(fn: list[Token], limit: int = 80) -> str:
    s = spell(fn)
    return repr(s if len(s) <= limit else s[: limit - 3] + "...")


def _angle_args(tokens: list[Token], open_at: int) -> list[Token]:
    depth = 0
    for k in range(open_at, len(tokens)):
        t = tokens[k].text
        depth += {"<": 1, ">": -1, ">>": -2, "(": 1, ")": -1}.get(t, 0)
        if depth <= 0:
            return tokens[open_at + 1 : k]
    return tokens[open_at + 1 :]


def function_name(fn: list[Token]) -> str | None:
    """``TORCH_FN((&at::autocast::f))``, ``&f``, ``f``, ``TORCH_FN(f)`` -> ``f``."""
    inner = [t for t in fn if t.text not in ("TORCH_FN", "(", ")", "&")]
    if not inner or inner[-1].kind != "id":
        return None
    if any(t.kind != "id" and t.text != "::" for t in inner):
        return None
    return inner[-1].text
