// The reference autocast's kernels at the borrowed Autocast key, in C++.
//
// Python (reference_impl/fast_kernels.py) builds this file with torch.utils.cpp_extension
// and registers one kernel per spec op at the borrowed key. A kernel finds the device
// whose reference region is open in this thread and whose native Autocast key is in the
// call's key set (the Python trampoline's rule), then:
//   * on a memo hit (a plan of positional casts only, no trace open), makes the casts,
//     serving weights from the weight cache, and calls the op with the keys below
//     autocast excluded, without entering Python;
//   * otherwise calls the Python handler of the op (the reference's own kernel), which
//     decides the plan with the policy engine and returns the plan's description so that
//     the next call of this kind stays here.
// The plan is the policy engine's: this file makes no decision of its own. The weight
// cast cache lives here for both paths (Python reaches it through cache_cast).

#include <torch/extension.h>

#include <ATen/CachedTensorUtils.h>
#include <ATen/autocast_mode.h>
#include <c10/core/InferenceMode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/csrc/jit/python/pybind_utils.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

namespace {

namespace py = pybind11;
using Key = c10::SmallVector<int64_t, 32>;

struct Cast {
  int64_t index;
  at::ScalarType to;
  bool cacheable;
};

struct Plan {
  bool untouched;
  bool any_cacheable;
  std::vector<Cast> casts;
};

constexpr size_t kMemoSize = 1024;  // plans kept per op (plan_memo.MEMO_SIZE)

// One op of one device's kernels: the Python handler and the memo of plans.
struct OpState {
  py::object python;  // python(args, kwargs) -> (result, plan description or None)
  std::mutex mu;
  std::unordered_map<uint64_t, std::vector<std::pair<Key, std::shared_ptr<const Plan>>>> memo;
  size_t size = 0;

  std::shared_ptr<const Plan> find(uint64_t h, const Key& k) {
    std::lock_guard<std::mutex> g(mu);
    auto it = memo.find(h);
    if (it == memo.end()) return nullptr;
    for (auto& e : it->second)
      if (e.first == k) return e.second;
    return nullptr;
  }

  void store(uint64_t h, Key k, std::shared_ptr<const Plan> p) {
    std::lock_guard<std::mutex> g(mu);
    if (size >= kMemoSize) {
      memo.clear();
      size = 0;
    }
    memo[h].emplace_back(std::move(k), std::move(p));
    ++size;
  }
};

// rules.cache, as the kernels apply it.
struct CacheRule {
  bool by_dtype, requires_grad_only, leaf_only, exclude_views, inference_cache;

  bool weight(const at::Tensor& t) const {  // eligibility.weight_tensor
    return (t.requires_grad() || !requires_grad_only) && (t.is_leaf() || !leaf_only) &&
        !(exclude_views && t.is_view()) && !at::caching::is_cached_tensor(t);
  }
};

// One spec's kernels on one device (a DeviceKernels in Python). Python owns it; a call that
// may run Python (which may close the region and free the table) holds what it still needs.
struct Table {
  c10::DeviceType device_type;
  CacheRule cache;
  std::vector<std::shared_ptr<OpState>> ops;  // by op index; null where the spec has no handler

  OpState* op(int64_t i) const {
    return i < static_cast<int64_t>(ops.size()) ? ops[i].get() : nullptr;
  }
};

struct Active {
  c10::DispatchKey native_key;
  Table* table;  // owned by Python, alive while the region is open
  c10::DispatchKeySet below;
};

struct ThreadState {
  std::vector<Active> devices;  // highest-ranked native key first
  c10::DispatchKeySet exclude;  // for calls the reference leaves alone
  bool tracing = false;
};
thread_local ThreadState tls;

// The weight cast cache (weight_cache.py): source identity (and dtype) -> (weak source, copy).
// As in autocast_mode.cpp, the weak pointer keeps the source's TensorImpl allocated, so its
// address cannot be reused by another tensor while the entry exists.
struct CacheKey {
  const c10::TensorImpl* src;
  int64_t dtype;
  bool operator==(const CacheKey& o) const { return src == o.src && dtype == o.dtype; }
};
struct CacheKeyHash {
  size_t operator()(const CacheKey& k) const {
    return std::hash<const void*>()(k.src) ^ (static_cast<size_t>(k.dtype) << 1);
  }
};
using WeakImpl = c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>;
thread_local std::unordered_map<CacheKey, std::pair<WeakImpl, at::Tensor>, CacheKeyHash> weight_cache;

std::pair<at::Tensor, bool> cached(const at::Tensor& src, at::ScalarType to, bool by_dtype) {
  CacheKey k{src.unsafeGetTensorImpl(), by_dtype ? static_cast<int64_t>(to) : -1};
  auto it = weight_cache.find(k);
  if (it != weight_cache.end()) return {it->second.second, true};
  at::Tensor copy = src.to(to);
  weight_cache.insert_or_assign(k, std::make_pair(WeakImpl(src.getIntrusivePtr()), copy));
  return {copy, false};
}

std::atomic<int64_t> n_fast{0}, n_python{0};  // calls served here / by the Python handler

// The memo key: the autocast dtype, then each argument (a tensor by dtype and device, other
// values by kind and value). False for an argument kind it cannot key (Python decides).
bool key_tensor(const at::Tensor& t, Key& k) {
  if (!t.defined()) {
    k.push_back(1);
    return true;
  }
  k.push_back(2);
  k.push_back(static_cast<int64_t>(t.scalar_type()));
  k.push_back(static_cast<int64_t>(t.device().type()));
  k.push_back(t.device().index());
  return true;
}

bool key_value(const c10::IValue& v, Key& k) {
  if (v.isTensor()) return key_tensor(v.toTensor(), k);
  if (v.isNone()) {
    k.push_back(3);
  } else if (v.isBool()) {
    k.push_back(4);
    k.push_back(v.toBool());
  } else if (v.isInt()) {
    k.push_back(5);
    k.push_back(v.toInt());
  } else if (v.isDouble()) {
    double d = v.toDouble();
    int64_t bits;
    std::memcpy(&bits, &d, sizeof bits);
    k.push_back(6);
    k.push_back(bits);
  } else if (v.isIntList()) {
    auto l = v.toIntList();
    k.push_back(7);
    k.push_back(static_cast<int64_t>(l.size()));
    for (int64_t x : l) k.push_back(x);
  } else if (v.isTensorList()) {
    auto l = v.toTensorList();
    k.push_back(8);
    k.push_back(static_cast<int64_t>(l.size()));
    for (const at::Tensor& t : l) key_tensor(t, k);
  } else if (v.isString()) {
    const std::string& s = v.toStringRef();
    k.push_back(9);
    k.push_back(static_cast<int64_t>(s.size()));
    for (unsigned char c : s) k.push_back(c);
  } else if (v.isDevice()) {
    k.push_back(10);
    k.push_back(static_cast<int64_t>(v.toDevice().type()));
    k.push_back(v.toDevice().index());
  } else {
    return false;
  }
  return true;
}

uint64_t hash_key(const Key& k) {
  uint64_t h = 1469598103934665603ull;
  for (int64_t x : k) h = (h ^ static_cast<uint64_t>(x)) * 1099511628211ull;
  return h;
}

std::shared_ptr<const Plan> parse_plan(const py::handle& d) {  // (untouched, ((index, dtype, cacheable), ...))
  auto t = d.cast<py::tuple>();
  auto plan = std::make_shared<Plan>();
  plan->untouched = t[0].cast<bool>();
  plan->any_cacheable = false;
  for (auto c : t[1].cast<py::tuple>()) {
    auto ct = c.cast<py::tuple>();
    Cast cast{ct[0].cast<int64_t>(), ct[1].cast<at::ScalarType>(), ct[2].cast<bool>()};
    plan->any_cacheable = plan->any_cacheable || cast.cacheable;
    plan->casts.push_back(cast);
  }
  return plan;
}

void apply(const c10::OperatorHandle& op, const CacheRule rule, const Plan& plan, c10::DispatchKeySet below,
           torch::jit::Stack* stack) {
  c10::impl::ExcludeDispatchKeyGuard guard(below);
  if (!plan.untouched) {
    const size_t base = stack->size() - op.schema().arguments().size();
    const bool use_cache = plan.any_cacheable && at::autocast::is_autocast_cache_enabled() &&
        (rule.inference_cache || !c10::InferenceMode::is_enabled());
    for (const Cast& c : plan.casts) {
      c10::IValue& slot = (*stack)[base + c.index];
      const at::Tensor src = slot.toTensor();
      slot = use_cache && c.cacheable && rule.weight(src) ? cached(src, c.to, rule.by_dtype).first
                                                          : src.to(c.to);
    }
  }
  op.callBoxed(stack);
}

// The Python handler: the arguments as Python objects (keyword-only ones as keywords),
// the result back on the stack; the plan's description is memoized under ``key``.
void call_python(const c10::OperatorHandle& op, std::shared_ptr<OpState> held, const Key* key, uint64_t h,
                 torch::jit::Stack* stack) {
  n_python.fetch_add(1, std::memory_order_relaxed);
  const auto& schema = op.schema();
  const size_t n = schema.arguments().size();
  py::gil_scoped_acquire gil;
  std::shared_ptr<OpState> keep = std::move(held);  // released before the GIL (it holds a py::object)
  OpState& st = *keep;
  py::object result;
  {
    py::list args;
    py::dict kwargs;
    for (size_t i = 0; i < n; ++i) {
      const auto& a = schema.arguments()[i];
      py::object v = torch::jit::toPyObject(std::move((*stack)[stack->size() - n + i]));
      if (a.kwarg_only())
        kwargs[py::str(a.name())] = v;
      else
        args.append(v);
    }
    torch::jit::drop(*stack, n);
    py::tuple out = st.python(py::tuple(args), kwargs, key != nullptr);
    result = out[0];
    if (key != nullptr && !out[1].is_none()) st.store(h, *key, parse_plan(out[1]));
  }
  const auto& returns = schema.returns();
  if (returns.size() == 1) {
    stack->push_back(torch::jit::toIValue(result, returns[0].type()));
  } else if (returns.size() > 1) {
    auto items = result.cast<py::sequence>();
    for (size_t i = 0; i < returns.size(); ++i)
      stack->push_back(torch::jit::toIValue(items[i], returns[i].type()));
  }
}

void handle(const c10::OperatorHandle& op, const Table& table, int64_t index, c10::DispatchKeySet below,
            torch::jit::Stack* stack) {
  const std::shared_ptr<OpState>& st = table.ops[index];
  if (tls.tracing) return call_python(op, st, nullptr, 0, stack);  // the trace records in Python
  Key key;
  key.push_back(static_cast<int64_t>(at::autocast::get_autocast_dtype(table.device_type)));
  const size_t n = op.schema().arguments().size();
  for (size_t i = stack->size() - n; i < stack->size(); ++i)
    if (!key_value((*stack)[i], key)) return call_python(op, st, nullptr, 0, stack);
  const uint64_t h = hash_key(key);
  if (auto plan = st->find(h, key)) {
    n_fast.fetch_add(1, std::memory_order_relaxed);
    return apply(op, table.cache, *plan, below, stack);
  }
  call_python(op, st, &key, h, stack);
}

// The kernel of one op at the borrowed key (reference_dispatch._trampoline).
struct Kernel final : c10::OperatorKernel {
  Kernel(int64_t index, c10::DispatchKey at) : index(index), at(at) {}
  int64_t index;
  c10::DispatchKey at;  // the borrowed key

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
    for (const Active& dev : tls.devices) {
      if (ks.has(dev.native_key) && dev.table->op(index) != nullptr)
        return handle(op, *dev.table, index, dev.below, stack);
    }
    // The key is always excluded here, also in a thread that never opened a region but
    // inherited the key from one that did (at::launch, TorchScript's fork).
    c10::impl::ExcludeDispatchKeyGuard guard(tls.exclude.add(at));
    op.callBoxed(stack);
  }
};

c10::DispatchKeySet key_set(const std::vector<c10::DispatchKey>& keys) {
  c10::DispatchKeySet s;
  for (auto k : keys) s = s.add(k);
  return s;
}

void register_op(const std::string& ns, const std::string& name, c10::DispatchKey at, int64_t index) {
  // Kept for the process, like the Python kernels they replace.
  auto* lib = new torch::Library(torch::Library::IMPL, ns, at, __FILE__, __LINE__);
  lib->impl(name.c_str(), torch::CppFunction::makeFromBoxedFunctor(std::make_unique<Kernel>(index, at)));
}

void set_thread(const std::vector<std::tuple<c10::DispatchKey, Table*, std::vector<c10::DispatchKey>>>& devices,
                const std::vector<c10::DispatchKey>& exclude) {
  std::vector<Active> now;
  for (const auto& [key, table, below] : devices) now.push_back(Active{key, table, key_set(below)});
  tls.devices = std::move(now);
  tls.exclude = key_set(exclude);
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  py::class_<Table>(m, "Table")
      .def(py::init([](const std::string& device, bool by_dtype, bool requires_grad_only, bool leaf_only,
                       bool exclude_views, bool inference_cache) {
        auto t = std::make_unique<Table>();
        t->device_type = c10::Device(device).type();
        t->cache = CacheRule{by_dtype, requires_grad_only, leaf_only, exclude_views, inference_cache};
        return t;
      }))
      .def("set", [](Table& t, int64_t index, py::object python) {
        if (index >= static_cast<int64_t>(t.ops.size())) t.ops.resize(index + 1);
        t.ops[index] = std::make_shared<OpState>();
        t.ops[index]->python = std::move(python);
      })
      .def("memo_size", [](const Table& t, int64_t index) {
        OpState* st = t.op(index);
        if (st == nullptr) return size_t{0};
        std::lock_guard<std::mutex> g(st->mu);
        return st->size;
      });
  m.def("register_op", &register_op);
  m.def("set_thread", &set_thread);
  m.def("set_tracing", [](bool on) { tls.tracing = on; });
  m.def("cache_cast", [](const at::Tensor& src, at::ScalarType to, bool by_dtype) {
    return cached(src, to, by_dtype);
  });
  m.def("cache_clear", []() { weight_cache.clear(); });
  m.def("cache_size", []() { return weight_cache.size(); });
  m.def("counters", []() { return std::make_pair(n_fast.load(), n_python.load()); });
}
