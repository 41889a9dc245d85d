"""F18: inductor (default, and with freezing) on cpu elides a program's own cast to bfloat16 that
autocast's cast to float16 follows (a float16 region around conv1d, whose bias the program cast
to bfloat16): it computes float16 of the float32 value where eager rounds it to bfloat16 first.
emulate_precision_casts keeps the cast (bitwise equal to eager), aot_eager agrees. The mechanism
of pytorch#179561. Met by program 977 of the 2.15.0 freezing campaign."""

import torch
import torch._inductor.config as inductor_config


def program(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    with torch.autocast("cpu", dtype=torch.float16):
        return torch.nn.functional.conv1d(x, w, bias.to(torch.bfloat16), padding=1)


print("torch", torch.__version__)
torch.manual_seed(0)
x, w = torch.randn(2, 4, 10).bfloat16(), torch.randn(6, 4, 3).bfloat16()
bias = torch.randn(6) * 150 + 0.3  # values whose bfloat16 rounding float16 can tell apart
eager = program(x, w, bias)
for backend, config in (
    ("aot_eager", {}),
    ("inductor", {}),
    ("inductor", {"freezing": True}),
    ("inductor", {"emulate_precision_casts": True}),
):
    torch._dynamo.reset()
    with torch.no_grad(), inductor_config.patch(**config):
        got = torch.compile(program, backend=backend)(x, w, bias)
    gap = (got.float() - eager.float()).abs().max().item()
    print(f"{backend} {config or ''}: {got.dtype}, largest difference from eager {gap}")
