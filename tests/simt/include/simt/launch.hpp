// Kernel launches for the SIMT layer. tools/rewrite_cu.py turns CUDA's
//     kernel<<<grid, block, smem, stream>>>(args...)
// into
//     kernel * ::qrt::simt::launch({"kernel", __FILE__, __LINE__}, grid, block, smem, stream)(args...)
// which needs no knowledge of where the kernel expression starts: launch(...)(args...) binds first and holds the
// configuration and arguments, and operator* then gets the kernel's own parameter types from its pointer, converts
// the arguments to them once (as CUDA copies them into parameter space) and enqueues the grid on the stream.
// `programmatic`: the launch carries cudaLaunchAttributeProgrammaticStreamSerialization (cudaLaunchKernelEx on a
// GPU). The layer runs grids one after the other anyway; it counts such launches and checks that every thread of
// them waits for the previous grid (cudaGridDependencySynchronize) before it exits.
#pragma once

#include <cstddef>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

#include "simt/types.hpp"

namespace qrt::simt {

struct LaunchSite {
  const char* kernel;
  const char* file;
  int line;
};

namespace detail {

// One kernel with its parameters, run once per GPU thread.
struct KernelBody {
  virtual ~KernelBody() = default;
  virtual void run_thread() = 0;
};

template <class... P>
struct BoundKernel final : KernelBody {
  using Params = std::tuple<std::decay_t<P>...>;
  BoundKernel(void (*f)(P...), Params p) : fn(f), params(std::move(p)) {}
  // Every thread gets its own copies of by-value parameters, as every GPU thread reads parameter space.
  void run_thread() override {
    std::apply([this](const auto&... p) { fn(p...); }, params);
  }
  void (*fn)(P...);
  Params params;
};

// Checks the configuration (recording a launch error as a GPU would refuse it) and enqueues the grid.
void enqueue_launch(const LaunchSite& site, dim3 grid, dim3 block, size_t dynamic_smem, cudaStream_t stream,
                    const void* kernel_id, size_t param_bytes, std::shared_ptr<KernelBody> body, bool programmatic);

template <class... P, class Args, size_t... I>
std::tuple<std::decay_t<P>...> convert_args(Args&& args, std::index_sequence<I...>) {
  return std::tuple<std::decay_t<P>...>(std::get<I>(std::forward<Args>(args))...);
}

}  // namespace detail

template <class... A>
struct PendingLaunch {
  LaunchSite site;
  dim3 grid, block;
  size_t smem;
  cudaStream_t stream;
  bool programmatic;
  std::tuple<A...> args;
};

struct LaunchConfig {
  LaunchSite site;
  dim3 grid, block;
  size_t smem;
  cudaStream_t stream;
  bool programmatic;
  template <class... A>
  PendingLaunch<std::decay_t<A>...> operator()(A&&... args) const {
    return {site, grid, block, smem, stream, programmatic, std::tuple<std::decay_t<A>...>(std::forward<A>(args)...)};
  }
};

inline LaunchConfig launch(LaunchSite site, dim3 grid, dim3 block, size_t smem = 0, cudaStream_t stream = nullptr,
                           bool programmatic = false) {
  return LaunchConfig{site, grid, block, smem, stream, programmatic};
}

template <class... P, class... A>
void operator*(void (*kernel)(P...), PendingLaunch<A...>&& pending) {
  static_assert(sizeof...(P) == sizeof...(A), "a kernel launched with the wrong number of arguments");
  auto params = detail::convert_args<P...>(std::move(pending.args), std::index_sequence_for<A...>{});
  constexpr size_t param_bytes = (size_t{0} + ... + sizeof(std::decay_t<P>));
  detail::enqueue_launch(pending.site, pending.grid, pending.block, pending.smem, pending.stream,
                         reinterpret_cast<const void*>(kernel), param_bytes,
                         std::make_shared<detail::BoundKernel<P...>>(kernel, std::move(params)), pending.programmatic);
}

}  // namespace qrt::simt
