// The named function signalled_write: a copy from page-locked host memory queued behind a device-side wait for a
// host thread's signal, so that the host goes on queueing while another thread still makes the bytes.
#include <cstdint>

#include "backend_objects.hpp"
#include "cuda_status.hpp"
#include "ops.hpp"

namespace strata::cuda {
namespace {

// A device that waits longer than this fails its queue instead of hanging (strata/backend.h).
constexpr uint64_t kMaxWaitNs = uint64_t{60} * 1000 * 1000 * 1000;

// One thread polls the host's value (page-locked memory, reached over the bus; acquire at system scope, so that
// the copy queued after this kernel reads the bytes stored before the signal).
__global__ void await_signal_kernel(const volatile uint64_t* signal, uint64_t value) {
  uint64_t start = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  for (;;) {
    uint64_t seen = 0;
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(seen) : "l"(signal) : "memory");
    if (seen >= value) return;
    uint64_t now = 0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (now - start > kMaxWaitNs) __trap();
    __nanosleep(500);
  }
}

}  // namespace

void signalled_write(strata_backend* backend, const strata_signalled_write* write) {
  auto& instance = deref(backend, "backend");
  const auto& request = deref(write, "write");
  if (request.struct_size < STRATA_FIELD_END(strata_signalled_write, value)) {
    invalid_argument("signalled_write: struct_size is too small");
  }
  auto& buffer = deref(request.buffer, "buffer");
  sdk::check_buffer_range(buffer, request.offset, request.bytes, "signalled_write");
  if (!instance.in_host_memory(const_cast<const uint64_t*>(&deref(request.signal, "signal")), sizeof(uint64_t))) {
    invalid_argument("signalled_write: signal is not in host_alloc memory");
  }
  if (request.bytes > 0 && (request.src == nullptr || !instance.in_host_memory(request.src, request.bytes))) {
    invalid_argument("signalled_write: src is not in host_alloc memory");
  }
  if (instance.recording != nullptr) invalid_argument("signalled_write: not inside a step graph");
  buffer.note_write();
  await_signal_kernel<<<1, 1, 0, instance.stream>>>(request.signal, request.value);
  check(cudaGetLastError(), "signalled_write: the wait");
  if (request.bytes == 0) return;
  check(cudaMemcpyAsync(buffer.memory.as<std::byte>() + request.offset, request.src, request.bytes,
                        cudaMemcpyHostToDevice, instance.stream),
        "signalled_write: the copy");
}

}  // namespace strata::cuda
