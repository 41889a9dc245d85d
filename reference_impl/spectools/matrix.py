"""The op-by-device policy grid, and its Markdown and HTML renderings (pure functions).

The HTML page is one self-contained file (inline CSS and script, no network):
a colour per policy, a legend with counts, and a filter box that matches op
names and policies.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass

from autocast_spec.model import POLICY_ORDER, Policy, Spec

# One colour per policy (background); chosen to stay distinct for common colour-vision deficiencies.
POLICY_COLOURS: dict[Policy, str] = {
    Policy.LOWER_PRECISION_FP: "#9ecae1",
    Policy.FP32: "#fdae6b",
    Policy.FP32_SET_OPT_DTYPE: "#fdd0a2",
    Policy.FP32_APPEND_DTYPE: "#fee6ce",
    Policy.PROMOTE: "#bcbddc",
    Policy.LOWER_FIRST_ARG: "#c7e9c0",
    Policy.BANNED: "#e7969c",
}


@dataclass(frozen=True)
class Matrix:
    torch_version: str
    devices: tuple[str, ...]
    rows: tuple[tuple[str, tuple[Policy | None, ...]], ...]  # (op, one cell per device)

    def counts(self, device: str) -> dict[Policy, int]:
        i = self.devices.index(device)
        out = {p: 0 for p in POLICY_ORDER}
        for _, cells in self.rows:
            if cells[i] is not None:
                out[cells[i]] += 1  # type: ignore[index]
        return out


def build_matrix(spec: Spec, devices: Sequence[str] | None = None) -> Matrix:
    """Every op any of ``devices`` (default: all in the spec) lists, with its policy per device."""
    names = tuple(devices) if devices else tuple(spec.devices)
    ops = sorted({op for d in names for op in spec.devices[d].ops})
    rows = tuple((op, tuple(spec.devices[d].policy_of(op) for d in names)) for op in ops)
    return Matrix(spec.torch_version, names, rows)


def _uniform(cells: tuple[Policy | None, ...]) -> bool:
    return len(set(cells)) == 1


def to_markdown(m: Matrix) -> str:
    head = "| op | " + " | ".join(m.devices) + " |"
    sep = "|---|" + "---|" * len(m.devices)
    lines = [f"Autocast policy by op and device, torch {m.torch_version} (— = not autocast)", "", head, sep]
    for op, cells in m.rows:
        text = [c.value if c else "—" for c in cells]
        lines.append(f"| `{op}` | " + " | ".join(text) + " |")
    return "\n".join(lines) + "\n"


_CSS = """
body{font:14px/1.4 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.3em;margin:0 0 .3em}
.bar{padding:.5em 0;border-bottom:1px solid #ddd}
#filter{font-size:1em;padding:.35em .5em;width:24em;max-width:90%}
.legend span{display:inline-block;padding:.1em .5em;margin:.2em .3em .2em 0;border-radius:3px;
 border:1px solid #0002}
table{border-collapse:collapse;margin-top:.6em}
th,td{border:1px solid #ccc;padding:.15em .5em;text-align:left;white-space:nowrap}
thead th{position:sticky;top:0;background:#f4f4f4;z-index:1}
tr.totals th{position:static;white-space:normal;font-weight:normal;font-size:.8em;max-width:12em}
td{font-size:.92em}
td.op{font-family:ui-monospace,Menlo,Consolas,monospace}
td.none{color:#999;background:#fafafa}
tr.mixed td.op{font-weight:600}
#count{margin-left:1em;color:#555}
"""

_SCRIPT = """
(function(){
  var box=document.getElementById('filter'), rows=document.querySelectorAll('tbody tr'),
      only=document.getElementById('mixed'), count=document.getElementById('count');
  function apply(){
    var terms=box.value.toLowerCase().split(/\\s+/).filter(Boolean), shown=0;
    rows.forEach(function(r){
      var text=r.getAttribute('data-text');
      var ok=terms.every(function(t){return text.indexOf(t)>=0;}) &&
             (!only.checked || r.classList.contains('mixed'));
      r.style.display=ok?'':'none'; if(ok) shown++;
    });
    count.textContent=shown+' of '+rows.length+' ops';
  }
  box.addEventListener('input',apply); only.addEventListener('change',apply); apply();
})();
"""


def to_html(m: Matrix) -> str:
    e = html.escape
    legend = (
        "".join(f'<span style="background:{POLICY_COLOURS[p]}">{e(p.value)}</span>' for p in POLICY_ORDER)
        + '<span class="none-key" style="background:#fafafa">— not autocast</span>'
    )
    head = "".join(f"<th>{e(d)}</th>" for d in m.devices)
    totals = "".join(
        "<th>" + "<br>".join(e(f"{n} {p.value}") for p, n in m.counts(d).items() if n) + "</th>"
        for d in m.devices
    )
    body = []
    for op, cells in m.rows:
        tds = []
        for c in cells:
            if c is None:
                tds.append('<td class="none">—</td>')
            else:
                tds.append(f'<td style="background:{POLICY_COLOURS[c]}">{e(c.value)}</td>')
        text = " ".join([op, *(c.value if c else "none" for c in cells)]).lower()
        cls = "" if _uniform(cells) else ' class="mixed"'
        body.append(f'<tr{cls} data-text="{e(text)}"><td class="op">{e(op)}</td>{"".join(tds)}</tr>')
    title = f"Autocast policy by op and device (torch {e(m.torch_version)})"
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{title}</title><style>{_CSS}</style></head><body>"
        f"<h1>{title}</h1>"
        '<div class="bar"><input id="filter" type="search" placeholder="filter: op name or policy, '
        'e.g. conv fp32" autofocus> <label><input id="mixed" type="checkbox"> only ops that differ '
        'between devices</label><span id="count"></span>'
        f'<div class="legend">{legend}</div></div>'
        f"<table><thead><tr><th>op</th>{head}</tr>"
        f'<tr class="totals"><th>ops per policy</th>{totals}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table>"
        f"<script>{_SCRIPT}</script></body></html>\n"
    )
