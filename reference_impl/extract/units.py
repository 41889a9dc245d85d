"""A unit's registration blocks: ``TORCH_LIBRARY_IMPL(ns, Autocast<Key>, m) { ... }``, the
``m.impl(NAME, c10::DispatchKey::Autocast<Key>, FN)`` of ``TORCH_LIBRARY[_FRAGMENT](ns, m)``
blocks, and a vendor's own block macros (``vendor.source_forms.block_macros``). A block opened
through a macro extract cannot read, or an Autocast registration in a form it does not know, is a
problem naming file and line: never registrations dropped in silence."""

from __future__ import annotations

from autocast_spec.model import SourceForms

from .lexer import Token, spell
from .macros import collect_args
from .outside import Span, check_outside, short_text
from .preprocess import Problem, Unit
from .registrations import Block, Found, Functions, braced

_LIBRARY = ("TORCH_LIBRARY", "TORCH_LIBRARY_FRAGMENT")
WRAPPED = ("TORCH_LIBRARY_IMPL", *_LIBRARY)  # a vendor's macro named like these may wrap one


def _autocast_key_in(tokens: list[Token]) -> bool:
    """The tokens name an Autocast dispatch key (``AutocastCPU``, ``c10::DispatchKey::AutocastXLA``)."""
    return any(t.kind == "id" and t.text.startswith("Autocast") for t in tokens)


def _wrapped_block(toks: list[Token], i: int, found: Found) -> bool:
    """``IPEX_TORCH_LIBRARY_IMPL(aten, AutocastCPU, m) { ... }`` (or a ``*TORCH_LIBRARY_FRAGMENT``
    whose body registers on an Autocast key): a block opened through a macro of the sources' own
    that no file read defines as the plain torch macro: a problem (its registrations would be
    lost), True. Any other use of such a name: False."""
    got = collect_args(toks, i + 1) if i + 1 < len(toks) and toks[i + 1].text == "(" else None
    if got is None or got[1] >= len(toks) or toks[got[1]].text != "{":
        return False
    if not _autocast_key_in([x for a in got[0] for x in a] + braced(toks, got[1])):
        return False
    name, spelled = toks[i].text, ", ".join(spell(a) for a in got[0])
    like = next(w for w in WRAPPED if name.endswith(w))
    found.problems.append(
        Problem(
            toks[i].where,
            f"{name}({spelled}) {{ ... }}: a registration block opened through {name}, which no file "
            f"read defines as plain {like}; its registrations are not read (pass the file that "
            "defines it, or name it in the vendor file's vendor.source_forms.block_macros and pass "
            "--spec FILE)",
        )
    )
    return True


def _keyed_impls(block: Block, body: list[Token]) -> None:
    """``m.impl(NAME, c10::DispatchKey::Autocast<X>, FN)`` in a ``TORCH_LIBRARY[_FRAGMENT](ns, m)``
    block (an op defined and given its kernels in one place, as IPEX does): a registration on that
    key. The block's other statements (``m.def``, other keys) are not autocast's and not read; an
    Autocast key named in any other form (``torch::dispatch(...)``) is a problem."""
    var, k = block.var, 0
    while k < len(body):
        if [t.text for t in body[k : k + 4]] != [var, ".", "impl", "("]:
            if body[k].kind == "id" and body[k].text.startswith("Autocast"):
                block.problem(
                    body[k],
                    f"a kernel for {body[k].text} in a form extract does not read "
                    f"(only {var}.impl(NAME, c10::DispatchKey::{body[k].text}, FN) is)",
                )
            k += 1
            continue
        got = block.call(body, k, k + 3, f"{var}.impl")
        if got is None:
            return
        args, end = got
        key = args[1][-1].text if len(args) == 3 and args[1] else ""
        if key.startswith("Autocast") and "DispatchKey" in [x.text for x in args[1]]:
            if key not in block.found.keys:
                block.found.keys.append(key)
            block.key = key
            block.method("impl", [args[0], args[2]], body[k:end], body[k])
        elif _autocast_key_in([x for a in args for x in a]):
            block.problem(
                body[k],
                f"{var}.impl with an Autocast key in a form extract does not read: {short_text(body[k:end])}",
            )
        k = end


def read_unit(unit: Unit, functions: Functions, found: Found, forms: SourceForms | None = None) -> None:
    """Add the Autocast registrations of ``unit`` to ``found``. ``forms``: a vendor's own forms
    (macros that open a block, kernel templates with a policy per dtype)."""
    toks = unit.tokens
    spans: list[Span] = []
    stands_for = {"TORCH_LIBRARY_IMPL": "TORCH_LIBRARY_IMPL", **{x: x for x in _LIBRARY}}
    stands_for.update(forms.block_macros if forms else {})
    i = 0
    while i < len(toks):
        t = toks[i]
        if t.text not in stands_for or i + 1 >= len(toks) or toks[i + 1].text != "(":
            if t.kind == "id" and t.text.endswith(WRAPPED) and _wrapped_block(toks, i, found):
                return
            i += 1
            continue
        got = collect_args(toks, i + 1)
        if got is None:
            found.problems.append(Problem(t.where, f"{t.text}( without its closing ')'"))
            return
        args, end = got
        if end >= len(toks) or toks[end].text != "{":
            i = end
            continue
        body = braced(toks, end)
        if end + len(body) + 1 >= len(toks):
            spelled = ", ".join(spell(a) for a in args)
            found.problems.append(
                Problem(
                    toks[end].where,
                    f"unterminated block: {t.text}({spelled}) {{ has no closing '}}' "
                    "before the end of the file",
                )
            )
            return
        at, i = i, end + len(body) + 2
        var = args[2][0].text if len(args) == 3 and len(args[2]) == 1 else None
        spans.append(Span(at, i - 1, ", ".join(spell(a) for a in args), var))
        names = [a[0].text if len(a) == 1 else None for a in args]
        if stands_for[t.text] in _LIBRARY:
            if len(names) == 2 and None not in names:
                _keyed_impls(Block(unit, found, functions, (str(names[0]), "", str(names[1])), forms), body)
            elif _autocast_key_in(body):
                spelled = ", ".join(spell(a) for a in args)
                found.problems.append(
                    Problem(t.where, f"{t.text}({spelled}) not understood (as {stands_for[t.text]})")
                )
            continue
        if len(names) != 3 or None in names:
            spelled = ", ".join(spell(a) for a in args)
            if "Autocast" in spelled or _autocast_key_in(body):
                found.problems.append(Problem(t.where, f"{t.text}({spelled}) not understood"))
            continue
        namespace, key, var = (str(n) for n in names)
        if not key.startswith("Autocast"):
            continue
        if key not in found.keys:
            found.keys.append(key)
        Block(unit, found, functions, (namespace, key, var), forms).read(body)
    check_outside(toks, spans, found.problems)
