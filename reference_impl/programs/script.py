"""A program and one pass as a standalone script (:func:`render`): the reproduction the runner
itself runs.

The script imports torch and the standard library only. It holds the program
(:func:`.render.program_source`), the regions around its calls and the reading of autocast's
state (written from the spec's entry points), the pass's code (:mod:`.pass_code`), the
observation (:mod:`.script_code`), and ``observe()``; run as ``python script.py`` it prints
what eager and the pass gave. The same text, imported from a file as a module, is what
:func:`.runner.run` calls ``observe()`` of: Dynamo caches graphs per code object, so each run
has code objects of its own.
"""

from __future__ import annotations

from . import pass_code, script_code
from .features import features
from .grammar import StateEntryPoints
from .layout import program_source
from .passes import Pass
from .render import autocast_text
from .tree import Autocast, Program


def around(name: str, autocast: Autocast | None) -> str:
    body = autocast_text(autocast) if autocast is not None else "contextlib.nullcontext()"
    return f"def {name}():\n    return {body}\n"


def state_source(getters: StateEntryPoints, devices: tuple[str, ...]) -> str:
    """``autocast_state()``: enabled and dtype per device type, the cache flag, the nesting depth;
    ``restore_autocast_state(state)`` puts such a state back (between eager and the pass)."""
    g = getters
    return (
        f"STATE_DEVICES = {devices!r}\n\n\n"
        "def autocast_state():\n"
        f"    nesting = {getters.increment}() - 1\n"
        f"    {getters.decrement}()\n"
        "    return {\n"
        f'        "enabled": {{d: {getters.enabled}(d) for d in STATE_DEVICES}},\n'
        f'        "dtype": {{d: str({getters.dtype}(d)).removeprefix("torch.") for d in STATE_DEVICES}},\n'
        f'        "cache_enabled": {getters.cache}(),\n'
        '        "nesting": nesting,\n'
        "    }\n\n\n"
        "def restore_autocast_state(state):\n"
        "    for d in STATE_DEVICES:\n"
        f'        {g.set_enabled}(d, state["enabled"][d])\n'
        f'        {g.set_dtype}(d, getattr(torch, state["dtype"][d]))\n'
        f'    {g.set_cache}(state["cache_enabled"])\n'
        f'    while autocast_state()["nesting"] > state["nesting"]:\n'
        f"        {g.decrement}()\n"
        f'    while autocast_state()["nesting"] < state["nesting"]:\n'
        f"        {g.increment}()\n"
        f"    {g.clear_cache}()\n"
    )


def context_dict(program: Program) -> dict[str, object]:
    c = program.context
    return {
        "grad_mode": c.grad_mode.value,
        "training": c.training,
        "second": c.second.kind.value if c.second is not None else None,
    }


def render(program: Program, how: Pass, getters: StateEntryPoints, devices: tuple[str, ...]) -> str:
    """The standalone script running ``program`` eagerly and through ``how``."""
    c = program.context
    second = c.second.around if c.second is not None else None
    used = sorted(features(program))
    header = (
        f'"""Generated autocast program {program.id}: {program.form.value} on {program.device}, '
        f"autocast dtype {program.dtype}.\n\n"
        f"Pass: {how.name}: {how.summary}.\n"
        f"Features: {', '.join(used)}.\n\n"
        "Run: python <this file>. It runs the program eagerly and through the pass and prints, for\n"
        "each, the output dtypes, the autocast state after each call and the gradients' dtypes;\n"
        'then the largest absolute difference of the outputs.\n"""\n\n'
        "from __future__ import annotations\n\n"
        "import contextlib\nimport math\nimport os\nimport tempfile\n\nimport torch\n"
    )
    functions = [pass_code.eager] + ([how.function] if how.function is not pass_code.eager else [])
    if how.function is pass_code.exported or how.function is pass_code.aoti:
        functions[1:1] = [pass_code.AsModule, pass_code.export_program]
    sections = [
        header,
        "# ---- the program " + "-" * 60 + "\n\n" + script_code.source_of(script_code.make_tensor),
        program_source(program),
        "# ---- around the calls, and autocast's state "
        + "-" * 33
        + "\n\n"
        + around("around_first", c.around)
        + "\n\n"
        + around("around_second", second)
        + "\n\n"
        + state_source(getters, devices),
        "# ---- the pass "
        + "-" * 62
        + "\n\n"
        + script_code.source_of(*functions)
        + f"\n\ndef apply_pass(model, example):\n    return {how.call_text(program)}\n",
        f"CONTEXT = {context_dict(program)!r}",
        "# ---- the observation "
        + "-" * 55
        + "\n\n"
        + script_code.source_of(*(f for f in script_code.HARNESS if f is not script_code.make_tensor)),
        "def observe():\n"
        "    return {\n"
        f'        "pass_name": {how.name!r},\n'
        '        "second": CONTEXT["second"],\n'
        '        "eager": side(eager, CONTEXT, globals()),\n'
        '        "pass": side(apply_pass, CONTEXT, globals()),\n'
        "    }\n",
        'if __name__ == "__main__":\n    report(observe())\n',
    ]
    return "\n\n".join(s.rstrip("\n") + "\n" for s in sections)
