"""Not autocast's (no region anywhere): a torch.compiler.nested_compile_region body returning
aten::_transform_bias_rescale_qkv's outputs raises "UncapturedHigherOrderOpError: ...
Encountered aliasing during higher order op tracing" under torch.compile with any backend,
"eager" too. On 2.13.0 only the process's first compile raises (a second, after
torch._dynamo.reset(), runs); on 2.14.1 and 2.15.0 every compile raises. Met by the 2.13.0
freezing campaign (programs 54, 1766)."""

import torch


@torch.compiler.nested_compile_region
def body(x: torch.Tensor, bias: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return torch.ops.aten._transform_bias_rescale_qkv.default(x, bias, 2)


def program(x: torch.Tensor, bias: torch.Tensor) -> tuple[torch.Tensor, ...]:
    body(x, bias)
    return body(x, bias)


print("torch", torch.__version__)
x, bias = torch.randn(2, 3, 24), torch.randn(24)
for compile_number in (1, 2):
    torch._dynamo.reset()
    try:
        with torch.no_grad():
            torch.compile(program, backend="eager")(x, bias)
        print(f"compile {compile_number}: runs")
    except Exception as e:
        lines = [line.strip() for line in str(e).splitlines() if line.strip()]
        said = next((line for line in lines if "aliasing" in line), lines[0] if lines else "")
        print(f"compile {compile_number}: {type(e).__name__}: ... {said[:100]}")
