// The "driver" side of the acme backend: what PyTorch needs before any kernel runs.
//
//   * an allocator: acme's device memory is plain host memory (c10::alloc_cpu), so
//     kernels can alias it as CPU tensors (acme_kernels.cpp);
//   * a device guard (c10::impl::DeviceGuardImplInterface for PrivateUse1): one
//     device, index 0, one synchronous stream; events are no-ops. The autograd
//     engine uses it to start acme's backward thread and to set the device there;
//   * the PrivateUse1 hooks (at::PrivateUse1HooksInterface): availability, device
//     count, primary context, the default generator. Autograd, torch.accelerator
//     and the RNG ask them.
//
// Everything registers itself when the library is loaded (static initializers):
// loading the .so with torch.ops.load_library is the whole installation.
// A real vendor replaces the bodies with calls into its runtime; the shape stays.

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/core/impl/alloc_cpu.h>

namespace acme {

constexpr c10::DeviceType kAcme = c10::DeviceType::PrivateUse1;

// --- memory ----------------------------------------------------------------

struct AcmeAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t nbytes) override {
    void* data = nbytes ? c10::alloc_cpu(nbytes) : nullptr;
    return {data, data, &release, c10::Device(kAcme, 0)};
  }
  static void release(void* ptr) {
    if (ptr) {
      c10::free_cpu(ptr);
    }
  }
  c10::DeleterFnPtr raw_deleter() const override {
    return &release;
  }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};

AcmeAllocator allocator;
REGISTER_ALLOCATOR(kAcme, &allocator);

// --- device guard ------------------------------------------------------------

struct AcmeGuardImpl final : c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override {
    return kAcme;
  }
  c10::Device exchangeDevice(c10::Device d) const override {
    check(d);
    return c10::Device(kAcme, 0);
  }
  c10::Device getDevice() const override {
    return c10::Device(kAcme, 0);
  }
  void setDevice(c10::Device d) const override {
    check(d);
  }
  void uncheckedSetDevice(c10::Device) const noexcept override {}
  c10::Stream getStream(c10::Device d) const noexcept override {
    return c10::Stream(c10::Stream::DEFAULT, d);
  }
  c10::Stream exchangeStream(c10::Stream s) const noexcept override {
    return s;  // one stream per device
  }
  c10::DeviceIndex deviceCount() const noexcept override {
    return 1;
  }
  // acme runs every kernel synchronously: events are recorded and done at once.
  void record(void**, const c10::Stream&, const c10::DeviceIndex, const c10::EventFlag) const override {}
  void block(void*, const c10::Stream&) const override {}
  bool queryEvent(void*) const override {
    return true;
  }
  void destroyEvent(void*, const c10::DeviceIndex) const noexcept override {}
  void synchronizeStream(const c10::Stream&) const override {}
  void synchronizeDevice(const c10::DeviceIndex) const override {}

 private:
  static void check(c10::Device d) {
    TORCH_CHECK(d.type() == kAcme && d.index() <= 0, "acme has one device (acme:0), not ", d);
  }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, AcmeGuardImpl);

// --- hooks ---------------------------------------------------------------------

struct AcmeHooks final : at::PrivateUse1HooksInterface {
  bool isBuilt() const override {
    return true;
  }
  bool isAvailable() const override {
    return true;
  }
  bool hasPrimaryContext(c10::DeviceIndex) const override {
    return true;
  }
  c10::DeviceIndex deviceCount() const override {
    return 1;
  }
  c10::DeviceIndex getCurrentDevice() const override {
    return 0;
  }
  void setCurrentDevice(c10::DeviceIndex) const override {}
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex) const override {
    return 0;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex) const override {
    return 0;
  }
  c10::Device getDeviceFromPtr(void*) const override {
    return c10::Device(kAcme, 0);
  }
  c10::Allocator* getPinnedMemoryAllocator() const override {
    return c10::GetCPUAllocator();
  }
  // Random numbers are drawn by the CPU kernels the fallback runs (acme_kernels.cpp),
  // so acme's generator is a CPU generator that says it belongs to acme.
  const at::Generator& getDefaultGenerator(c10::DeviceIndex) const override {
    static at::Generator gen = at::make_generator<at::CPUGeneratorImpl>();
    return gen;
  }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    TORCH_CHECK(false, "acme: resizing a storage in place is not supported (", newsize, " bytes)");
  }
};

const bool hooks_registered = [] {
  static AcmeHooks hooks;
  at::RegisterPrivateUse1HooksInterface(&hooks);
  return true;
}();

}  // namespace acme
