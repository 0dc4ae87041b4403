// Shared host-side helpers for every family: op registration under the build's
// namespace, and argument checks whose messages name the argument.
#pragma once
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/grad_mode.h>
#include <c10/macros/Macros.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <cmath>
#include <cstring>
#include <string>

// The op namespace (jk_<family>_<key12>) is a string the loader compiles into a one-line source of
// its own in the build folder (jk_namespace.cpp), not a -D flag of every source: so a new key (after an
// edit of ops.py, or of one source) recompiles no source that did not change, and ninja rebuilds only
// what did. Hidden: each family's library binds to its own string, whatever else the process loaded.
extern "C" __attribute__((visibility("hidden"))) const char jk_namespace[];

// TORCH_LIBRARY and TORCH_LIBRARY_IMPL with the namespace given at run time: the same static
// registration objects those macros declare, named per line so that several may share a file.
#define JK_REGISTRATION(kind, key, m, uid)                                                                 \
  static void C10_CONCATENATE(jk_library_init_, uid)(torch::Library&);                                    \
  static const torch::detail::TorchLibraryInit C10_CONCATENATE(jk_library_static_init_, uid)(            \
      kind, &C10_CONCATENATE(jk_library_init_, uid), jk_namespace, key, __FILE__, __LINE__);             \
  void C10_CONCATENATE(jk_library_init_, uid)(torch::Library & m)
#define JK_LIBRARY(m) JK_REGISTRATION(torch::Library::DEF, std::nullopt, m, __LINE__)
#define JK_LIBRARY_IMPL(key, m) \
  JK_REGISTRATION(torch::Library::IMPL, std::make_optional(c10::DispatchKey::key), m, __LINE__)

namespace jk {

// Numbers and shapes are formatted with std::to_string, never streamed: on the GPU image
// an ostream insertion of a number instantiated in an extension crashed inside
// libstdc++ (headers and runtime library out of step), turning a bad-input error into
// a segfault. Messages built only from strings are safe everywhere.
inline std::string num(double value) { return std::to_string(value); }

inline std::string shape(at::IntArrayRef sizes) {
  std::string s = "[";
  for (size_t i = 0; i < sizes.size(); ++i) s += (i ? ", " : "") + std::to_string(sizes[i]);
  return s + "]";
}

inline bool is_supported_float(at::ScalarType t) {
  return t == at::kFloat || t == at::kDouble || t == at::kHalf || t == at::kBFloat16;
}

// float32 / float64 / float16 / bfloat16.
inline void check_float(const at::Tensor& t, const char* name) {
  TORCH_CHECK_VALUE(is_supported_float(t.scalar_type()), name,
                    " must be float32, float64, float16 or bfloat16, got ", t.scalar_type());
}

// float32 / float64 only (ops whose accuracy needs full precision).
inline void check_float32_or_64(const at::Tensor& t, const char* name) {
  TORCH_CHECK_VALUE(t.scalar_type() == at::kFloat || t.scalar_type() == at::kDouble, name,
                    " must be float32 or float64, got ", t.scalar_type());
}

inline void check_dim(const at::Tensor& t, const char* name, int64_t dim) {
  TORCH_CHECK_VALUE(t.dim() == dim, name, " must be ", std::to_string(dim), "-D, got shape ", shape(t.sizes()));
}

inline void check_same_device(const at::Tensor& a, const char* a_name, const at::Tensor& b, const char* b_name) {
  TORCH_CHECK_VALUE(a.device() == b.device(), b_name, " is on ", b.device(), " but ", a_name, " is on ",
                    a.device(), ": move both to one device");
}

inline void check_same_dtype(const at::Tensor& a, const char* a_name, const at::Tensor& b, const char* b_name) {
  TORCH_CHECK_VALUE(a.scalar_type() == b.scalar_type(), b_name, " has dtype ", b.scalar_type(), " but ",
                    a_name, " has dtype ", a.scalar_type(), ": convert one of them");
}

inline void check_same_shape(const at::Tensor& a, const char* a_name, const at::Tensor& b, const char* b_name) {
  TORCH_CHECK_VALUE(a.sizes() == b.sizes(), b_name, " has shape ", shape(b.sizes()), " but ", a_name,
                    " has shape ", shape(a.sizes()));
}

// Same device, dtype and shape as the first tensor.
inline void check_like(const at::Tensor& a, const char* a_name, const at::Tensor& b, const char* b_name) {
  check_same_device(a, a_name, b, b_name);
  check_same_dtype(a, a_name, b, b_name);
  check_same_shape(a, a_name, b, b_name);
}

inline void check_finite(double value, const char* name) {
  TORCH_CHECK_VALUE(std::isfinite(value), name, " must be finite, got ", num(value));
}

inline void check_positive(double value, const char* name) {
  TORCH_CHECK_VALUE(std::isfinite(value) && value > 0, name, " must be a finite number > 0, got ", num(value));
}

// ---------------------------------------------------------------- ops differentiated in Python
//
// An op whose derivative ops.py gives (loader.register_autograd) needs a kernel at the Autograd key. A
// Python one runs on every call, gradient or not: ~4 µs of a 6 µs call of relu_add on the CPU. So such an
// op is defined with def_differentiable: its Autograd kernel is route_autograd (C++), which redispatches
// below autograd unless grad mode is on and a tensor argument requires grad; only then does the call go
// to the op's twin `<name>_autograd` (same schema), whose Autograd kernel is the Python one and whose
// kernel below autograd calls the op again (call_original).

inline bool requires_grad(const c10::IValue& value) {
  if (value.isTensor()) return value.toTensor().requires_grad();
  if (value.isList())
    for (const c10::IValue& item : value.toListRef())
      if (requires_grad(item)) return true;
  return false;
}

constexpr const char* kAutogradTwin = "_autograd";

inline void route_autograd(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
  bool needs_grad = false;
  if (at::GradMode::is_enabled())
    for (const c10::IValue& argument : torch::jit::last(*stack, op.schema().arguments().size()))
      needs_grad = needs_grad || requires_grad(argument);
  if (!needs_grad) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    op.redispatchBoxed(keys & c10::after_autograd_keyset, stack);
    return;
  }
  c10::Dispatcher::singleton()
      .findSchemaOrThrow((op.schema().name() + kAutogradTwin).c_str(), op.schema().overload_name().c_str())
      .callBoxed(stack);
}

inline void call_original(const c10::OperatorHandle& twin, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
  const std::string& name = twin.schema().name();
  c10::Dispatcher::singleton()
      .findSchemaOrThrow(name.substr(0, name.size() - std::strlen(kAutogradTwin)).c_str(),
                         twin.schema().overload_name().c_str())
      .redispatchBoxed(keys, stack);
}

// m.def(schema) for an op with a derivative in ops.py, and its twin.
inline void def_differentiable(torch::Library& m, const char* schema) {
  const std::string text(schema);
  const std::string name = text.substr(0, text.find('(')), twin = name + kAutogradTwin;
  m.def(schema);
  m.def((twin + text.substr(name.size())).c_str());
  m.impl(name.c_str(), torch::dispatch(c10::DispatchKey::Autograd,
                                       torch::CppFunction::makeFromBoxedFunction<&route_autograd>()));
  m.impl(twin.c_str(), torch::dispatch(c10::DispatchKey::CompositeExplicitAutograd,
                                       torch::CppFunction::makeFromBoxedFunction<&call_original>()));
}

}  // namespace jk
