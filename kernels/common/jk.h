// Shared host-side helpers for every family: op registration under the build's
// namespace, and argument checks whose messages name the argument.
#pragma once
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/grad_mode.h>
#include <c10/core/InferenceMode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/macros/Macros.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

// The op namespace (jk_<family>_<key12>) is a string the loader compiles into a one-line source of
// its own in the build folder (jk_namespace.cpp), not a -D flag of every source: so a new key (after an
// edit of ops.py, or of one source) recompiles no source that did not change, and ninja rebuilds only
// what did. Hidden: each family's library binds to its own string, whatever else the process loaded.
extern "C" __attribute__((visibility("hidden"))) const char jk_namespace[];

// A registration that throws (a schema typo, an op defined twice, a second JK_LIBRARY of the family, a
// kernel whose signature is not its schema's) threw out of the library's static initializers, through
// dlopen, and terminated the process: a notebook's kernel died at `loader.reload`. The first such error
// is kept instead (jk_namespace.cpp) and the loader raises it as the build's error.
extern "C" __attribute__((visibility("hidden"))) void jk_registration_failed(const char* file, unsigned line,
                                                                             const char* what);

namespace jk::detail {
// What TORCH_LIBRARY's static object does (make a torch::Library, run the block on it), but an exception
// is recorded, not thrown, and the block's half-made registrations are undone with its Library.
class LibraryInit {
 public:
  LibraryInit(torch::Library::Kind kind, void (*init)(torch::Library&), std::optional<c10::DispatchKey> key,
              const char* file, uint32_t line) {
    try {
      init(library_.emplace(kind, jk_namespace, key, file, line));
    } catch (const c10::Error& error) {
      library_.reset();
      jk_registration_failed(file, line, error.what_without_backtrace());
    } catch (const std::exception& error) {
      library_.reset();
      jk_registration_failed(file, line, error.what());
    }
  }

 private:
  std::optional<torch::Library> library_;
};
}  // namespace jk::detail

// TORCH_LIBRARY and TORCH_LIBRARY_IMPL with the namespace given at run time, named per line so that
// several may share a file.
#define JK_REGISTRATION(kind, key, m, uid)                                                                 \
  static void C10_CONCATENATE(jk_library_init_, uid)(torch::Library&);                                    \
  static const jk::detail::LibraryInit C10_CONCATENATE(jk_library_static_init_, uid)(                    \
      kind, &C10_CONCATENATE(jk_library_init_, uid), key, __FILE__, __LINE__);                           \
  void C10_CONCATENATE(jk_library_init_, uid)(torch::Library & m)
#define JK_LIBRARY(m) JK_REGISTRATION(torch::Library::DEF, std::nullopt, m, __LINE__)
#define JK_LIBRARY_IMPL(key, m) \
  JK_REGISTRATION(torch::Library::IMPL, std::make_optional(c10::DispatchKey::key), m, __LINE__)

namespace jk {

// Numbers and shapes are formatted by snprintf and std::to_string, never streamed: on the GPU image
// an ostream insertion of a number instantiated in an extension crashed inside
// libstdc++ (headers and runtime library out of step), turning a bad-input error into
// a segfault. Messages built only from strings are safe everywhere. Nine significant digits:
// std::to_string's fixed six decimals printed a step size of -1e-9 as "-0.000000", and a clamp
// of (2e-7, 1e-7) as "clamp_min (0.000000) must be <= clamp_max (0.000000)" (session 40's review).
inline std::string num(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.9g", value);
  return text;
}

inline std::string shape(at::IntArrayRef sizes) {
  std::string s = "[";
  for (size_t i = 0; i < sizes.size(); ++i) s += (i ? ", " : "") + std::to_string(sizes[i]);
  return s + "]";
}

inline bool is_supported_float(at::ScalarType t) {
  return t == at::kFloat || t == at::kDouble || t == at::kHalf || t == at::kBFloat16;
}

// A None passed for a Tensor argument arrives as an undefined tensor, whose device or dtype is an error
// that names nothing ("tensor does not have a device"). Every check below that takes a name starts here.
inline void check_given(const at::Tensor& t, const char* name) {
  TORCH_CHECK_VALUE(t.defined(), name, " must be a tensor, got None");
}

// float32 / float64 / float16 / bfloat16.
inline void check_float(const at::Tensor& t, const char* name) {
  check_given(t, name);
  TORCH_CHECK_VALUE(is_supported_float(t.scalar_type()), name,
                    " must be float32, float64, float16 or bfloat16, got ", t.scalar_type());
}

// float32 / float64 only (ops whose accuracy needs full precision).
inline void check_float32_or_64(const at::Tensor& t, const char* name) {
  check_given(t, name);
  TORCH_CHECK_VALUE(t.scalar_type() == at::kFloat || t.scalar_type() == at::kDouble, name,
                    " must be float32 or float64, got ", t.scalar_type());
}

inline void check_dim(const at::Tensor& t, const char* name, int64_t dim) {
  check_given(t, name);
  TORCH_CHECK_VALUE(t.dim() == dim, name, " must be ", std::to_string(dim), "-D, got shape ", shape(t.sizes()));
}

inline void check_same_device(const at::Tensor& a, const char* a_name, const at::Tensor& b, const char* b_name) {
  check_given(a, a_name);
  check_given(b, b_name);
  TORCH_CHECK_VALUE(a.device() == b.device(), b_name, " is on ", b.device(), " but ", a_name, " is on ",
                    a.device(), ": move both to one device");
}

inline void check_same_dtype(const at::Tensor& a, const char* a_name, const at::Tensor& b, const char* b_name) {
  check_given(a, a_name);
  check_given(b, b_name);
  TORCH_CHECK_VALUE(a.scalar_type() == b.scalar_type(), b_name, " has dtype ", b.scalar_type(), " but ",
                    a_name, " has dtype ", a.scalar_type(), ": convert one of them");
}

inline void check_same_shape(const at::Tensor& a, const char* a_name, const at::Tensor& b, const char* b_name) {
  check_given(a, a_name);
  check_given(b, b_name);
  TORCH_CHECK_VALUE(a.sym_sizes() == b.sym_sizes(), b_name, " has shape ", shape(b.sizes()), " but ", a_name,
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

// ---------------------------------------------------------------- what autograd and autocast do with each op
//
// An op with no kernel at the Autograd key gets torch's fallback, which lets a backward pass through it
// with a warning and treats its outputs as constants: silently zero gradients (an energy's second
// derivative, through its score, came out wrong that way until session 24). So every op is defined
// with one of these, and tests check that none is left to the fallback (tests/test_autograd.py) and
// what each does under torch.autocast (tests/test_autocast.py):
// - def_differentiable: ops.py gives the derivative (loader.register_autograd);
// - def_differentiable_saving: the same, its twin also returning what the backward keeps;
// - def_not_differentiable: the outputs are constants for autograd (samplers, selections);
// - def_in_place: writes into an argument and has no derivative.
// An op that draws random numbers takes draws_tags(), {nondeterministic_seeded}: torch.compile then never
// runs a call again expecting the same result (its partitioner recomputed an untagged sampling.normal in
// a checkpointed region's backward, with new draws: a wrong gradient, session 40).

inline std::vector<at::Tag> draws_tags() { return {at::Tag::nondeterministic_seeded}; }

inline bool requires_grad(const c10::IValue& value) {
  if (value.isTensor()) return value.toTensor().requires_grad();
  if (value.isList())
    for (const c10::IValue& item : value.toListRef())
      if (requires_grad(item)) return true;
  return false;
}

// Forward-mode AD (torch.func.jvp, jacfwd and hessian; torch.autograd.forward_ad): a tangent that went
// through the kernels below autograd came out as if the op were constant (torch.func.hessian of an energy
// was all zeros until session 31). A differentiable op sends it to its twin, whose Python kernel gives the
// kernel's value the derivatives of ops.py's forward_formula (loader.register_autograd); an in-place op
// refuses it.
inline bool has_forward_tangent(const c10::IValue& value) {
  if (value.isTensor()) return value.toTensor()._fw_grad(/*level=*/0).defined();
  if (value.isList())
    for (const c10::IValue& item : value.toListRef())
      if (has_forward_tangent(item)) return true;
  return false;
}

// The op's kernels below autograd: ATen ops inside our kernels record no history, and the outputs do
// not require grad.
inline void call_below_autograd(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  op.redispatchBoxed(keys & c10::after_autograd_keyset, stack);
}

// An op whose derivative is in ops.py needs a kernel at the Autograd key. A Python one runs on every
// call, gradient or not: ~4 µs of a 6 µs call of relu_add on the CPU. So its Autograd kernel is
// route_autograd (C++), which calls the kernels below autograd unless grad mode is on and a tensor
// argument requires grad, or one carries a forward-mode tangent; only then does the call go to the op's
// twin `<name>_autograd` (same schema), whose Autograd kernel is the Python one and whose kernel below
// autograd calls the op again (call_original). (def_differentiable_saving's twin returns more, from the
// family's own kernels.)
constexpr const char* kAutogradTwin = "_autograd";

inline void route_autograd(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
  bool needs_autograd = false;
  const bool grad_mode = at::GradMode::is_enabled();
  for (const c10::IValue& argument : torch::jit::last(*stack, op.schema().arguments().size()))
    needs_autograd = needs_autograd || (grad_mode && requires_grad(argument)) || has_forward_tangent(argument);
  if (!needs_autograd) return call_below_autograd(op, keys, stack);
  const c10::OperatorHandle twin = c10::Dispatcher::singleton().findSchemaOrThrow(
      (op.schema().name() + kAutogradTwin).c_str(), op.schema().overload_name().c_str());
  twin.callBoxed(stack);
  // A twin of def_differentiable_saving returns more: what its backward saves, not the op's outputs.
  torch::jit::drop(*stack, twin.schema().returns().size() - op.schema().returns().size());
}

inline void call_original(const c10::OperatorHandle& twin, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
  const std::string& name = twin.schema().name();
  c10::Dispatcher::singleton()
      .findSchemaOrThrow(name.substr(0, name.size() - std::strlen(kAutogradTwin)).c_str(),
                         twin.schema().overload_name().c_str())
      .redispatchBoxed(keys, stack);
}

// ---- torch.autocast
// Under autocast our ops meet mixed float dtypes (a bfloat16 activation beside float32 weights or a
// float32 sample), which their dtype checks refuse. So each op that does not write in place gets an
// Autocast kernel (CPU and CUDA) that casts its float16 / bfloat16 / float32 tensor arguments to the
// widest of their dtypes (the type torch's promotion gives the same expression in plain ops; arguments
// of one dtype are left alone; float64 ones, such as diffusion's schedule, are never touched, as autocast
// leaves them), then runs the op with autocast off. Outside autocast, mixed dtypes are still an error.
inline bool autocast_eligible(const c10::IValue& argument) {
  if (!argument.isTensor()) return false;
  const at::ScalarType type = argument.toTensor().scalar_type();
  return type == at::kFloat || type == at::kHalf || type == at::kBFloat16;
}

template <c10::DispatchKey autocast_key>
void call_promoted(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
  c10::impl::ExcludeDispatchKeyGuard no_autocast(autocast_key);
  const size_t first = stack->size() - op.schema().arguments().size();
  std::optional<at::ScalarType> widest;
  for (size_t i = first; i < stack->size(); ++i) {
    if (!autocast_eligible((*stack)[i])) continue;
    const at::ScalarType type = (*stack)[i].toTensor().scalar_type();
    widest = widest ? c10::promoteTypes(*widest, type) : type;
  }
  for (size_t i = first; i < stack->size(); ++i)
    if (autocast_eligible((*stack)[i]) && (*stack)[i].toTensor().scalar_type() != *widest)
      (*stack)[i] = (*stack)[i].toTensor().to(*widest);
  op.callBoxed(stack);
}

// A call whose only tensor arguments are None finds no backend: torch raised "There were no tensor
// arguments to this function ...", naming nothing. Every op's CompositeExplicitAutograd kernel (the one the
// dispatcher takes with no tensor to go by, and for a backend we have no kernel for) says which argument.
// A sparse (or mkldnn) tensor comes here too, its backend (SparseCPU, ...) having no kernel: it is named, and
// asked to be dense (the message below had said that the build had no kernel "for cpu tensors").
inline void no_backend_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
  const auto& arguments = op.schema().arguments();
  const auto inputs = torch::jit::last(*stack, arguments.size());
  std::optional<c10::Device> device;
  for (size_t i = 0; i < arguments.size(); ++i) {
    const at::Tensor tensor = inputs[i].isTensor() ? inputs[i].toTensor() : at::Tensor();
    if (arguments[i].type()->kind() == c10::TypeKind::TensorType) check_given(tensor, arguments[i].name().c_str());
    TORCH_CHECK_VALUE(!tensor.defined() || tensor.layout() == at::kStrided, arguments[i].name(),
                      " must be a dense (strided) tensor, got layout ", tensor.layout(), ": pass ",
                      arguments[i].name(), ".to_dense()");
    if (tensor.defined() && !device) device = tensor.device();
  }
  TORCH_CHECK_NOT_IMPLEMENTED(false, op.schema().name(), " has no kernel for ",
                              device ? c10::DeviceTypeName(device->type(), /*lower_case=*/true) : std::string("these"),
                              " tensors in this build (one built without its CUDA half, as with JITKERNELS_CUDA=0, "
                              "runs CPU tensors only)");
}

// ---- the ways to define an op

// m.def(schema, tags) with `kernel` at the Autograd key and, unless the op writes in place, the Autocast
// kernels. Returns the op's name.
template <void (*kernel)(const c10::OperatorHandle&, c10::DispatchKeySet, torch::jit::Stack*)>
std::string define(torch::Library& m, const std::string& schema, bool promote, const std::vector<at::Tag>& tags = {}) {
  const std::string name = schema.substr(0, schema.find('('));
  m.def(schema.c_str(), tags);
  m.impl(name.c_str(), torch::dispatch(c10::DispatchKey::Autograd, torch::CppFunction::makeFromBoxedFunction<kernel>()));
  // Not for an op without tensor arguments (ddpm_schedule): its own kernel is that key's, and a second one
  // made torch warn of an overridden kernel at every load.
  if (schema.substr(0, schema.find("->")).find("Tensor") != std::string::npos) {
    m.impl(name.c_str(), torch::dispatch(c10::DispatchKey::CompositeExplicitAutograd,
                                         torch::CppFunction::makeFromBoxedFunction<&no_backend_kernel>()));
  }
  if (promote) {
    m.impl(name.c_str(), torch::dispatch(c10::DispatchKey::AutocastCPU,
                                         torch::CppFunction::makeFromBoxedFunction<&call_promoted<c10::DispatchKey::AutocastCPU>>()));
    m.impl(name.c_str(), torch::dispatch(c10::DispatchKey::AutocastCUDA,
                                         torch::CppFunction::makeFromBoxedFunction<&call_promoted<c10::DispatchKey::AutocastCUDA>>()));
  }
  return name;
}

// An op with a derivative in ops.py (loader.register_autograd), and its twin.
inline void def_differentiable(torch::Library& m, const char* schema, const std::vector<at::Tag>& tags = {}) {
  const std::string text(schema);
  const std::string twin = define<&route_autograd>(m, text, /*promote=*/true, tags) + kAutogradTwin;
  m.def((twin + text.substr(text.find('('))).c_str(), tags);
  m.impl(twin.c_str(), torch::dispatch(c10::DispatchKey::CompositeExplicitAutograd,
                                       torch::CppFunction::makeFromBoxedFunction<&call_original>()));
}

// The same for an op whose backward needs an intermediate its kernel makes anyway (conv1d_gn_mish's
// convolution output): recomputing it in the backward cost more than keeping it. The twin returns the
// op's outputs and then `saved` (schema return types, e.g. "Tensor conv_out"), which setup_context saves
// and route_autograd drops; the family implements the twin's kernels itself (those below autograd). The
// twin is internal: its saved outputs are constants for autograd (setup_context marks them so).
inline void def_differentiable_saving(torch::Library& m, const char* schema, const char* saved,
                                      const std::vector<at::Tag>& tags = {}) {
  const std::string text(schema);
  const std::string twin = define<&route_autograd>(m, text, /*promote=*/true, tags) + kAutogradTwin;
  const size_t arrow = text.rfind("->");  // (a default string could hold one)
  std::string returns = text.substr(text.find_first_not_of(' ', arrow + 2));
  if (returns.front() == '(') returns = returns.substr(1, returns.rfind(')') - 1);
  m.def((twin + text.substr(text.find('('), arrow - text.find('(')) + "-> (" + returns + ", " + saved + ")").c_str(),
        tags);
  m.impl(twin.c_str(), torch::dispatch(c10::DispatchKey::CompositeExplicitAutograd,
                                       torch::CppFunction::makeFromBoxedFunction<&no_backend_kernel>()));
}

// An op whose outputs are constants for autograd, as torch.randn's are (samplers, selections): they
// never require grad, whatever the inputs do. Docstrings say so.
inline void def_not_differentiable(torch::Library& m, const char* schema, const std::vector<at::Tag>& tags = {}) {
  define<&call_below_autograd>(m, schema, /*promote=*/true, tags);
}

// The Autograd kernel of an op that writes into its (a!) arguments and has no derivative: with grad
// mode on, a tensor argument that requires grad is an error (the write cannot be differentiated; torch's
// in-place ops refuse a leaf that requires grad likewise). Otherwise the op, then a bump of each written
// tensor's version counter, so that a backward which saved the old values raises (as after any in-place
// op) instead of using the new ones.
inline void call_in_place(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
  const auto& arguments = op.schema().arguments();
  const auto inputs = torch::jit::last(*stack, arguments.size());
  const std::string& qualified = op.schema().name();
  const std::string op_name = qualified.substr(qualified.find("::") + 2);  // without the build's namespace
  std::vector<at::Tensor> written;
  for (size_t i = 0; i < arguments.size(); ++i) {
    TORCH_CHECK(!has_forward_tangent(inputs[i]), op_name, " has no forward-mode derivative, but its argument '",
                arguments[i].name(), "' carries a forward-mode tangent (torch.func.jvp, jacfwd or hessian, or ",
                "torch.autograd.forward_ad): use the out-of-place op");
    TORCH_CHECK(!at::GradMode::is_enabled() || !requires_grad(inputs[i]), op_name, " writes in place and has",
                " no derivative, but its argument '", arguments[i].name(), "' requires grad: call it under",
                " torch.no_grad(), on detached tensors, or use the out-of-place op");
    if (arguments[i].alias_info() != nullptr && arguments[i].alias_info()->isWrite() && inputs[i].isTensor()) {
      written.push_back(inputs[i].toTensor());
      // As torch's in-place ops, before the write: the version bump after it raised with the tensor written.
      TORCH_CHECK(!written.back().is_inference() || c10::InferenceMode::is_enabled(), op_name, " writes into '",
                  arguments[i].name(), "', an inference tensor, outside torch.inference_mode(): clone it first");
    }
  }
  call_below_autograd(op, keys, stack);
  for (const at::Tensor& t : written) t.unsafeGetTensorImpl()->bump_version();
}

// An op that writes into arguments annotated (a!) and has no derivative (call_in_place). Its schema
// returns nothing, since torch.compile cannot functionalize a custom op whose output aliases an input;
// the Python wrapper returns the written tensor. No Autocast kernel: a cast copy could not be written.
inline void def_in_place(torch::Library& m, const char* schema, const std::vector<at::Tag>& tags = {}) {
  define<&call_in_place>(m, schema, /*promote=*/false, tags);
}

}  // namespace jk
