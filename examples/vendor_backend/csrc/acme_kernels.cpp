// acme's kernels (dispatch key PrivateUse1): the few every backend must own, and a
// CPU fallback for the rest.
//
//   * tensor creation and memory: empty, empty_strided, resize_, set_, _copy_from
//     (every .to(), .cpu(), copy_ lands here) and _local_scalar_dense (.item());
//   * views: ops that return an alias of their input must not go through the
//     fallback (it would alias a CPU copy), so they get acme kernels built from
//     ATen's generic TensorImpl code;
//   * convolution: PyTorch routes convolutions of a backend it does not know to
//     convolution_overrideable / convolution_backward_overrideable, whose default
//     kernels raise; acme runs them on the CPU;
//   * everything else: a boxed fallback that moves the arguments to the CPU, runs
//     the CPU kernel and moves the results back (at::native::cpu_fallback).
//
// acme memory is host memory (acme_runtime.cpp), so "moving to the CPU" is a copy
// between two host buffers, and any acme tensor can be aliased as a CPU tensor.
// A real vendor writes device kernels instead; the registrations look the same.

#include <ATen/EmptyTensor.h>
#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_local_scalar_dense_native.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/library.h>

namespace acme {
namespace {

constexpr c10::DispatchKeySet kAcmeKeys(c10::DispatchKey::PrivateUse1);

// --- creation and memory ------------------------------------------------------

at::Tensor acme_empty(
    c10::IntArrayRef size,
    std::optional<c10::ScalarType> dtype,
    std::optional<c10::Layout> layout,
    std::optional<c10::Device> device,
    std::optional<bool> pin_memory,
    std::optional<c10::MemoryFormat> memory_format) {
  TORCH_CHECK(c10::layout_or_default(layout) == c10::Layout::Strided, "acme: only strided tensors");
  return at::detail::empty_generic(
      size, c10::GetAllocator(c10::DeviceType::PrivateUse1), kAcmeKeys, c10::dtype_or_default(dtype),
      memory_format);
}

at::Tensor acme_empty_strided(
    c10::IntArrayRef size,
    c10::IntArrayRef stride,
    std::optional<c10::ScalarType> dtype,
    std::optional<c10::Layout> layout,
    std::optional<c10::Device> device,
    std::optional<bool> pin_memory) {
  TORCH_CHECK(c10::layout_or_default(layout) == c10::Layout::Strided, "acme: only strided tensors");
  return at::detail::empty_strided_generic(
      size, stride, c10::GetAllocator(c10::DeviceType::PrivateUse1), kAcmeKeys, c10::dtype_or_default(dtype));
}

// An acme tensor's memory seen as a CPU tensor (same sizes, strides, offset; no copy).
at::Tensor as_cpu(const at::Tensor& t) {
  if (t.device().type() != c10::DeviceType::PrivateUse1) {
    return t;
  }
  return at::from_blob(
      t.data_ptr(), t.sizes(), t.strides(), [](void*) {}, t.options().device(c10::kCPU));
}

// self -> dst, any direction between acme and the CPU, with dtype conversion.
at::Tensor acme_copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  at::Tensor dst_cpu = as_cpu(dst);
  at::native::copy_(dst_cpu, as_cpu(self), non_blocking);
  return dst;
}

const at::Tensor& acme_resize_(
    const at::Tensor& self, c10::IntArrayRef size, std::optional<c10::MemoryFormat> memory_format) {
  // same sizes: a no-op that keeps the strides (self may be a view)
  at::native::resize_impl_cpu_(self.unsafeGetTensorImpl(), size, /*stride=*/std::nullopt);
  if (memory_format.has_value()) {
    TORCH_CHECK(*memory_format != c10::MemoryFormat::Preserve, "acme: resize_ with memory_format=preserve");
    self.unsafeGetTensorImpl()->empty_tensor_restride(*memory_format);
  }
  return self;
}

// The fallback writes results back with this: dst is an out= argument or the self of
// an in-place op, possibly a view (output.narrow(...).add_(...)): keep its strides.
at::Tensor acme_copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  acme_resize_(dst, self.sizes(), std::nullopt);
  return acme_copy_from(self, dst, false);
}

at::Tensor& acme_set_storage(
    at::Tensor& self, c10::Storage source, int64_t offset, c10::IntArrayRef size, c10::IntArrayRef stride) {
  return at::native::set_storage_cpu_(self, std::move(source), offset, size, stride);
}

at::Scalar acme_local_scalar_dense(const at::Tensor& self) {
  return at::native::_local_scalar_dense_cpu(as_cpu(self));
}

// --- convolution ------------------------------------------------------------------

// Convolutions run on the CPU copies, below autograd (the caller records the
// history) and without CPU autocast (acme's autocast already chose the dtypes).
struct OnCpu {
  at::AutoDispatchBelowAutograd below_autograd;
  c10::impl::ExcludeDispatchKeyGuard no_autocast{c10::autocast_dispatch_keyset};
};

at::Tensor to_cpu(const at::Tensor& t) {
  return t.defined() ? t.cpu() : t;
}

at::Tensor to_acme(const at::Tensor& t, const at::Tensor& like) {
  return t.defined() ? t.to(like.device()) : t;
}

at::Tensor acme_convolution(
    const at::Tensor& input,
    const at::Tensor& weight,
    const std::optional<at::Tensor>& bias,
    c10::IntArrayRef stride,
    c10::IntArrayRef padding,
    c10::IntArrayRef dilation,
    bool transposed,
    c10::IntArrayRef output_padding,
    int64_t groups) {
  OnCpu guard;
  std::optional<at::Tensor> bias_cpu;
  if (bias.has_value() && bias->defined()) {
    bias_cpu = to_cpu(*bias);
  }
  at::Tensor out = at::convolution(
      to_cpu(input), to_cpu(weight), bias_cpu, stride, padding, dilation, transposed, output_padding, groups);
  return to_acme(out, input);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> acme_convolution_backward(
    const at::Tensor& grad_output,
    const at::Tensor& input,
    const at::Tensor& weight,
    c10::IntArrayRef stride,
    c10::IntArrayRef padding,
    c10::IntArrayRef dilation,
    bool transposed,
    c10::IntArrayRef output_padding,
    int64_t groups,
    std::array<bool, 3> output_mask) {
  OnCpu guard;
  // the bias has one value per output channel: dim 0 of the weight, or dim 1 (x groups) if transposed
  int64_t channels = transposed ? weight.size(1) * groups : weight.size(0);
  auto [gi, gw, gb] = at::convolution_backward(
      to_cpu(grad_output), to_cpu(input), to_cpu(weight), std::vector<int64_t>{channels}, stride, padding,
      dilation, transposed, output_padding, groups, output_mask);
  return {to_acme(gi, input), to_acme(gw, input), to_acme(gb, input)};
}

// --- fused RNN cells ------------------------------------------------------------------

// gru_cell and lstm_cell send every device but the CPU to fused kernels that only CUDA
// implements. acme writes them with ATen ops and registers them at its Autograd key, so
// that autograd differentiates the ops they call: no backward kernel to write.
std::tuple<at::Tensor, at::Tensor, at::Tensor> acme_fused_lstm_cell(
    const at::Tensor& input_gates,
    const at::Tensor& hidden_gates,
    const at::Tensor& cx,
    const std::optional<at::Tensor>& input_bias,
    const std::optional<at::Tensor>& hidden_bias) {
  at::Tensor gates = input_gates + hidden_gates;
  if (input_bias.has_value() && input_bias->defined()) {
    gates = gates + *input_bias + *hidden_bias;
  }
  auto chunks = gates.chunk(4, 1);
  at::Tensor i = chunks[0].sigmoid(), f = chunks[1].sigmoid(), g = chunks[2].tanh(), o = chunks[3].sigmoid();
  at::Tensor cy = f * cx + i * g;
  at::Tensor hy = o * cy.tanh();
  return {hy, cy, at::cat({i, f, g, o}, 1)};
}

std::tuple<at::Tensor, at::Tensor> acme_fused_gru_cell(
    const at::Tensor& input_gates,
    const at::Tensor& hidden_gates,
    const at::Tensor& hx,
    const std::optional<at::Tensor>& input_bias,
    const std::optional<at::Tensor>& hidden_bias) {
  at::Tensor ig = input_gates, hg = hidden_gates;
  if (input_bias.has_value() && input_bias->defined()) {
    ig = ig + *input_bias;
    hg = hg + *hidden_bias;
  }
  auto i = ig.chunk(3, 1);
  auto h = hg.chunk(3, 1);
  at::Tensor r = (i[0] + h[0]).sigmoid(), z = (i[1] + h[1]).sigmoid();
  at::Tensor n = (i[2] + r * h[2]).tanh();
  at::Tensor hy = n + z * (hx - n);
  return {hy, at::cat({r, z, i[2], h[2], hx}, 1)};
}

// --- everything else ------------------------------------------------------------

void acme_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  at::native::cpu_fallback(op, stack);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", acme_empty);
  m.impl("empty_strided", acme_empty_strided);
  m.impl("_copy_from", acme_copy_from);
  m.impl("_copy_from_and_resize", acme_copy_from_and_resize);
  m.impl("resize_", acme_resize_);
  m.impl("set_.source_Storage_storage_offset", acme_set_storage);
  m.impl("set_.source_Storage", at::native::set_);
  m.impl("set_.source_Tensor", at::native::set_tensor_);
  m.impl("_local_scalar_dense", acme_local_scalar_dense);
  // views: ATen's device-independent implementations
  m.impl("as_strided", at::native::as_strided_tensorimpl);
  m.impl("view", at::native::view);
  m.impl("_reshape_alias", at::native::_reshape_alias);
  m.impl("unfold", at::native::unfold);
  m.impl("view_as_real", at::native::view_as_real);
  m.impl("view_as_complex", at::native::view_as_complex);
  // convolutions
  m.impl("convolution_overrideable", acme_convolution);
  m.impl("convolution_backward_overrideable", acme_convolution_backward);
}

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("_thnn_fused_lstm_cell", acme_fused_lstm_cell);
  m.impl("_thnn_fused_gru_cell", acme_fused_gru_cell);
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&acme_cpu_fallback>());
}

}  // namespace acme
