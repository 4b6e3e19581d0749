// A CUPTI injection library for scripts/device-test.sh --trace (a developer's tool, not part of strata): the
// CUDA driver loads it into any CUDA program named with CUDA_INJECTION64_PATH and calls InitializeInjection().
// It records when every kernel ran on the GPU, kernels inside CUDA graphs too, node by node, so the overlap
// that programmatic dependent launch gives and the gaps between kernels show (ncu runs kernels one at a time
// and cannot see either). At exit it writes CSV lines "start_ns,end_ns,stream,graph,grid,block,name" to the
// file named by STRATA_KERNEL_TRACE (default kernel-trace.csv); scripts/kernel-trace.py reads them.
#include <cupti.h>
#include <cxxabi.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

namespace {

FILE* trace_file = nullptr;

std::string readable(const char* mangled) {
  int status = 0;
  char* name = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string result = status == 0 && name != nullptr ? name : mangled;
  std::free(name);
  for (char& c : result) {
    if (c == ',') c = ';';  // one CSV field
  }
  return result;
}

void CUPTIAPI give_buffer(uint8_t** buffer, size_t* size, size_t* max_records) {
  *size = size_t{16} << 20;
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, *size));
  *max_records = 0;
}

void CUPTIAPI take_buffer(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid_bytes) {
  CUpti_Activity* record = nullptr;
  // After the flush at exit the file is closed: a buffer CUPTI hands over later (context teardown) is dropped.
  while (trace_file != nullptr && cuptiActivityGetNextRecord(buffer, valid_bytes, &record) == CUPTI_SUCCESS) {
    if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
      const auto* kernel = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      std::fprintf(trace_file, "kernel,%llu,%llu,%u,%u,%dx%dx%d,%dx%dx%d,%s\n",
                   static_cast<unsigned long long>(kernel->start), static_cast<unsigned long long>(kernel->end),
                   kernel->streamId, kernel->graphId, kernel->gridX, kernel->gridY, kernel->gridZ, kernel->blockX,
                   kernel->blockY, kernel->blockZ, kernel->name != nullptr ? readable(kernel->name).c_str() : "?");
    } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      const auto* copy = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
      std::fprintf(trace_file, "copy,%llu,%llu,%u,%u,,,%llu bytes kind %u\n",
                   static_cast<unsigned long long>(copy->start), static_cast<unsigned long long>(copy->end),
                   copy->streamId, copy->graphId, static_cast<unsigned long long>(copy->bytes), copy->copyKind);
    } else if (record->kind == CUPTI_ACTIVITY_KIND_RUNTIME) {
      const auto* call = reinterpret_cast<const CUpti_ActivityAPI*>(record);
      const char* name = nullptr;
      if (cuptiGetCallbackName(CUPTI_CB_DOMAIN_RUNTIME_API, call->cbid, &name) != CUPTI_SUCCESS) name = "?";
      std::fprintf(trace_file, "call,%llu,%llu,0,0,,,%s\n", static_cast<unsigned long long>(call->start),
                   static_cast<unsigned long long>(call->end), name);
    }
  }
  std::free(buffer);
}

void flush_at_exit() {
  cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMCPY);
  cuptiActivityDisable(CUPTI_ACTIVITY_KIND_RUNTIME);
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::fclose(std::exchange(trace_file, nullptr));
}

}  // namespace

extern "C" int InitializeInjection() {
  const char* path = std::getenv("STRATA_KERNEL_TRACE");
  trace_file = std::fopen(path != nullptr ? path : "kernel-trace.csv", "w");
  if (trace_file == nullptr) return 0;
  std::fprintf(trace_file, "kind,start_ns,end_ns,stream,graph,grid,block,name\n");
  if (cuptiActivityRegisterCallbacks(give_buffer, take_buffer) != CUPTI_SUCCESS ||
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS ||
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY) != CUPTI_SUCCESS ||
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME) != CUPTI_SUCCESS) {
    std::fprintf(stderr, "kernel-trace: CUPTI refused kernel tracing\n");
    return 0;
  }
  std::atexit(flush_at_exit);
  return 1;
}
