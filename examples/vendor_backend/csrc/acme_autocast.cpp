// acme's autocast: which ops run in which precision under torch.autocast("acme").
//
// Written the way PyTorch writes its own devices' lists (aten/src/ATen/autocast_mode.cpp):
// ATen's KERNEL_PRIVATEUSEONE macros over ATen's shared op lists, then acme's own
// entries. Every difference from CUDA's policy is declared in acme.yaml, the device
// spec the conformance suite checks these registrations against:
//
//   acme.yaml                                   here
//   extends: privateuse1 (CUDA's policy)        the AT_FORALL_* lists (CUDA registers the same)
//   remove: cudnn_convolution(_transpose)       not registered: acme has no cuDNN
//   fp32: binary_cross_entropy                  CUDA bans it; acme computes it in float32
//   fp32: batch_norm                            acme's batch norm keeps float32 statistics
//
// torch 2.13 registers no AutocastPrivateUse1 kernel, so these registrations add. Were a
// release to register some, the library loaded later would win: the dispatcher keeps the
// newest m.impl for an op and key (it warns once, "Overriding a previously registered
// kernel", and lists the older one as inactive in torch._C._dispatch_dump).
//
// ACME_DEVIATION plants one thing a vendor must not ship (tests/test_vendor_backend.py
// builds each into its own library and checks that certification catches it):
//   ACME_MOVED    batch_norm registered lower_precision_fp, where acme.yaml says fp32
//   ACME_MISSING  binary_cross_entropy not registered, where acme.yaml says fp32
//   ACME_EXTRA    _addmm_activation registered, which acme.yaml does not list
//   ACME_ABORT    acme's atan2 kernel calls std::abort() (once: see trip_once)
//   ACME_HANG     acme's cosh kernel never returns (once: see trip_once)

#include <ATen/autocast_mode.h>
#include <torch/library.h>

#define ACME_MOVED 1
#define ACME_MISSING 2
#define ACME_EXTRA 3
#define ACME_ABORT 4
#define ACME_HANG 5
#if defined(ACME_DEVIATION) && !(ACME_DEVIATION >= ACME_MOVED && ACME_DEVIATION <= ACME_HANG)
#error "ACME_DEVIATION must be one of ACME_MOVED, ACME_MISSING, ACME_EXTRA, ACME_ABORT, ACME_HANG"
#endif

// Ops without an acme autocast kernel skip the AutocastPrivateUse1 key. torch registers
// no fallback for this key (it does for CUDA, CPU, XPU, ...): the backend must.
TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFallthrough());
}

namespace {
using namespace at;  // the shared lists name ATen's types unqualified (Tensor, Scalar, ...)

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
  // lower_precision_fp
#define _KERNEL_ACME_LOW_PRECISION_FP(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
  AT_FORALL_LOWER_PRECISION_FP(_KERNEL_ACME_LOW_PRECISION_FP)

  // fp32
#define _KERNEL_ACME_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
  AT_FORALL_FP32(_KERNEL_ACME_FP32)

  // fp32_set_opt_dtype
#define _KERNEL_ACME_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
  AT_FORALL_FP32_SET_OPT_DTYPE(_KERNEL_ACME_FP32_SET_OPT_DTYPE)

  // fp32_append_dtype
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)

  // promote
#define _KERNEL_ACME_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
  AT_FORALL_PROMOTE(_KERNEL_ACME_PROMOTE)

  // acme's own entries (declared in acme.yaml)
#if ACME_DEVIATION != ACME_MISSING
  KERNEL_PRIVATEUSEONE(binary_cross_entropy, fp32)
#endif
#if ACME_DEVIATION == ACME_MOVED
  KERNEL_PRIVATEUSEONE(batch_norm, lower_precision_fp)
#else
  KERNEL_PRIVATEUSEONE(batch_norm, fp32)
#endif
#if ACME_DEVIATION == ACME_EXTRA
  KERNEL_PRIVATEUSEONE(_addmm_activation, lower_precision_fp)
#endif
}

}  // namespace

#if ACME_DEVIATION == ACME_ABORT || ACME_DEVIATION == ACME_HANG
#include <ATen/native/CPUFallback.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace {

// True the first time any process calls it: the file $ACME_TRIP_ONCE does not exist yet
// (it is created). A kernel that fails every time would fail every test of the op, each in
// a fresh worker; once is enough to show that certification records it and goes on.
bool trip_once() {
  const char* marker = std::getenv("ACME_TRIP_ONCE");
  struct stat st;
  if (marker == nullptr || stat(marker, &st) == 0) {
    return false;
  }
  if (FILE* f = std::fopen(marker, "w")) {
    std::fclose(f);
  }
  return true;
}

// A compute kernel (PrivateUse1, below autocast) that breaks the first time it runs.
void broken_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  if (trip_once()) {
#if ACME_DEVIATION == ACME_ABORT
    std::abort();
#else
    for (;;) {
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
#endif
  }
  at::native::cpu_fallback(op, stack);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
#if ACME_DEVIATION == ACME_ABORT
  m.impl("atan2", torch::CppFunction::makeFromBoxedFunction<&broken_kernel>());
#else
  m.impl("cosh", torch::CppFunction::makeFromBoxedFunction<&broken_kernel>());
#endif
}
#endif
