"""soft_margin_loss of a float16 input and a float32 target: float16 eagerly and under aot_eager,
float32 under inductor (no autocast involved; a program's disabled region or an op no autocast
list names meets it). huber_loss does the same (pytorch/pytorch#197098, which does not name
soft_margin_loss). Seen on torch 2.13.0 cpu. Found by the programs category (known bug
inductor-soft-margin-loss-skips-promotion).

Run: python docs/findings/inductor-soft-margin-loss-dtype.py (torch only)."""

import torch
import torch.nn.functional as F

x = torch.randn(4, 8, dtype=torch.float16)
target = torch.ones(4, 8)
print("eager:", F.soft_margin_loss(x, target).dtype)
for backend in ("aot_eager", "inductor"):
    torch._dynamo.reset()
    print(f"{backend}:", torch.compile(F.soft_margin_loss, backend=backend)(x, target).dtype)
