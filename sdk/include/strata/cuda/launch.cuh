// Kernel launches that overlap the kernel before them (programmatic dependent launch, Hopper and later).
// A decode step is a chain of ~20 short kernels per layer, each reading what the one before wrote; launched
// one after another, each waits for the previous one to drain before its own blocks are even scheduled.
// launch_after_previous() lets the GPU schedule a kernel's blocks as soon as every block of the kernel
// before it has started (that kernel called let_next_kernel_launch()); the new blocks then wait in
// wait_for_previous_kernel() until the previous kernel has finished and its writes are visible. Whatever a
// kernel does before that wait overlaps the previous kernel: it may read only data no kernel writes (the
// weights), e.g. prefetch its weight rows. Every kernel launched this way must call wait_for_previous_kernel()
// before it touches activations, caches or outputs. Compiled for an architecture below sm_90 both calls are
// empty, so such a kernel (say, in a plugin built for sm_86 and run on an H200) gets an ordinary launch: the
// choice is made per kernel, from the PTX version it was compiled from. Stream capture keeps these edges,
// so step graphs replay with the same overlap.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

namespace strata::sdk::cuda {

__device__ inline void let_next_kernel_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

__device__ inline void wait_for_previous_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Whether memory may be read or written 16 bytes at a time (float4, uint4, cp.async): the launchers check
// their rows before taking a vectorized kernel.
inline bool is_16_byte_aligned(const void* memory) { return reinterpret_cast<uintptr_t>(memory) % 16 == 0; }

// The start of a kernel with nothing to do before its inputs are ready.
__device__ inline void start_after_previous_kernel() {
  let_next_kernel_launch();
  wait_for_previous_kernel();
}

// Asks the L2 cache for bytes [first, first + bytes) of read-only data, one 128-byte line per lane of a warp
// at a time: a kernel's weight rows, fetched while the kernel still waits for its inputs.
__device__ inline void prefetch_lines(const uint8_t* first, size_t bytes, int lane, int lanes) {
  constexpr size_t kLine = 128;
  for (size_t offset = static_cast<size_t>(lane) * kLine; offset < bytes;
       offset += static_cast<size_t>(lanes) * kLine) {
    asm volatile("prefetch.global.L2 [%0];" ::"l"(first + offset));
  }
}

// ask()'s answer for key, asked once per key for the process: the launchers consult these on every launch,
// and the runtime's answers do not change. Each call site (each Ask type) has its own table.
template <class Key, class Value, class Ask>
Value asked_once(const Key& key, Ask ask) {
  static std::mutex mutex;
  static std::map<Key, Value> known;
  const std::lock_guard lock(mutex);
  if (const auto found = known.find(key); found != known.end()) return found->second;
  return known.emplace(key, ask()).first->second;
}

// A kernel's attributes (its PTX version, static shared memory...); all zero where the runtime cannot answer
// (that error is cleared, so that it is not taken for a later launch's).
inline cudaFuncAttributes kernel_attributes(const void* kernel) {
  return asked_once<const void*, cudaFuncAttributes>(kernel, [kernel] {
    cudaFuncAttributes attributes{};
    if (cudaFuncGetAttributes(&attributes, kernel) != cudaSuccess) {
      attributes = cudaFuncAttributes{};
      (void)cudaGetLastError();
    }
    return attributes;
  });
}

// Whether a kernel was compiled with the calls above: from PTX for sm_90 or later, which also means the
// device is one that schedules dependent launches early.
inline bool kernel_waits_for_previous(const void* kernel) { return kernel_attributes(kernel).ptxVersion >= 90; }

// kernel<<<grid, block, shared_bytes, stream>>>(args...) in clusters of cluster_blocks blocks along x (thread
// block clusters, sm_90 and later; 1: none), allowed to overlap the kernel before it (see above). A failed
// launch is reported through cudaGetLastError(), as for <<<>>>.
template <class... Params, class... Args>
void launch_after_previous_in_clusters(unsigned cluster_blocks, void (*kernel)(Params...), dim3 grid, dim3 block,
                                       size_t shared_bytes, cudaStream_t stream, Args... args) {
  cudaLaunchAttribute attributes[2]{};
  unsigned count = 0;
  if (kernel_waits_for_previous(reinterpret_cast<const void*>(kernel))) {
    attributes[count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attributes[count++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (cluster_blocks > 1) {
    attributes[count].id = cudaLaunchAttributeClusterDimension;
    attributes[count++].val.clusterDim = {cluster_blocks, 1, 1};
  }
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  config.attrs = attributes;
  config.numAttrs = count;
  (void)cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...);
}

// The same without clusters: kernel<<<grid, block, shared_bytes, stream>>>(args...), allowed to overlap the
// kernel before it.
template <class... Params, class... Args>
void launch_after_previous(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream,
                           Args... args) {
  launch_after_previous_in_clusters(1, kernel, grid, block, shared_bytes, stream, args...);
}

}  // namespace strata::sdk::cuda
