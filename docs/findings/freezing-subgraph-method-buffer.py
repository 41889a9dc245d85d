"""Not autocast's (no region anywhere): inductor with freezing=True, under inference_mode, of a
module whose torch.compiler.nested_compile_region method reads a buffer raises
"AssertionError: Freevar has no source: node.op=get_attr node.name=l__self___b0" (2.13.0, 2.14.1,
2.15.0); without freezing it compiles. Met by the 2.13.0 freezing campaign (program 1636)."""

import torch
import torch._inductor.config as inductor_config


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("b0", torch.randn(5, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.h0(x)
        return self.h0(x)

    @torch.compiler.nested_compile_region
    def h0(self, x: torch.Tensor) -> torch.Tensor:
        return self.b0 * x


print("torch", torch.__version__)
x = torch.randn(5, 4)
for freezing in (False, True):
    torch._dynamo.reset()
    try:
        with torch.inference_mode(), inductor_config.patch(freezing=freezing):
            torch.compile(Model().eval(), backend="inductor")(x)
        print(f"freezing={freezing}: compiles")
    except Exception as e:
        print(f"freezing={freezing}: {type(e).__name__}: {str(e).splitlines()[0][:120]}")
