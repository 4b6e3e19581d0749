// How fast the H200 streams a decode step's expert rows with no decoding at all (a developer's tool, not part
// of strata): the floor under the expert kernels' ~16 us a layer for qwen3-30b-a3b's 16.2 MB. It lays out 48
// layers of 128 experts in qwen3-30b-a3b's IQ3_S shapes (gate and up 768 rows of 2048 values, 880 bytes a row;
// down 2048 rows of 768, 330 bytes), picks 8 experts a layer, and times kernels that only read their bytes,
// layer after layer (each layer's 260 MB push the one before out of the 50 MB L2):
//   gateup-narrow  the gate/up kernel's reads as its decoder makes them (384 blocks of 8 warps, 2 rows of both
//                  matrices a warp, a lane's groups l and l + 32 of each row, 9 narrow loads a group)
//   gateup-planar  the same loads a group, but with a row's group fields in planes (the 64 groups' index bytes,
//                  then their signs, high bits, scales, the blocks' d), so that a warp's loads coalesce
//   gateup-wide    the same bytes, 16 bytes a lane, a warp's rows read together (coalesced)
//   down-wide      the 8 down matrices, 16 bytes a lane
//   all-wide       gate, up and down of the 8 experts in one kernel
// Each launch's span is from its first block's start to its last block's end (%globaltimer), so launch gaps
// do not count; one line per kernel: the median span and the bandwidth it gives. Build and run on the GPU
// machine: nvcc -O3 -arch=sm_90 -o /tmp/expert-stream-bench scripts/expert-stream-bench.cu && /tmp/expert-stream-bench
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

namespace {

constexpr int kLayers = 48, kExperts = 128, kUsed = 8, kRepeats = 10;
constexpr int kWidth = 2048, kFfn = 768, kBlockBytes = 110, kBlockValues = 256;
constexpr size_t kGateRowBytes = size_t{kWidth} / kBlockValues * kBlockBytes;  // 880
constexpr size_t kDownRowBytes = size_t{kFfn} / kBlockValues * kBlockBytes;    // 330
constexpr size_t kGateMatrixBytes = kGateRowBytes * kFfn, kDownMatrixBytes = kDownRowBytes * kWidth;
constexpr int kGroups = kWidth / 32;  // a gate/up row's 32-value groups

struct Layer {
  const uint8_t* gate;
  const uint8_t* up;
  const uint8_t* down;
  int experts[kUsed];
};

__device__ uint64_t now() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// The launch's earliest block start and latest block end.
struct Span {
  unsigned long long start, end;
};

__device__ void span_begin(Span* span) {
  if (threadIdx.x == 0) atomicMin(&span->start, static_cast<unsigned long long>(now()));
}
__device__ void span_end(Span* span, uint32_t folded, uint32_t* sink) {
  __syncthreads();
  if (threadIdx.x == 0) atomicMax(&span->end, static_cast<unsigned long long>(now()));
  if (folded == 0x12345678u) *sink = folded;  // keeps the loads
}

__device__ uint32_t u16(const uint8_t* p) { return *reinterpret_cast<const uint16_t*>(p); }

// A group's loads as the IQ3_S decoder makes them: d, the 8 low index bytes (as 4 two-byte words), the
// high bits, the signs (2 words) and the scale byte.
__device__ uint32_t read_group(const uint8_t* row, int g) {
  const uint8_t* block = row + g / 8 * kBlockBytes;
  const int group = g % 8;
  uint32_t v = u16(block) ^ block[106 + group / 2] ^ block[66 + group];
  v ^= u16(block + 74 + 4 * group) ^ (u16(block + 76 + 4 * group) << 16);
  v ^=
      u16(block + 2 + 8 * group) ^ u16(block + 4 + 8 * group) ^ u16(block + 6 + 8 * group) ^ u16(block + 8 + 8 * group);
  return v;
}

// The same fields of group g with a row laid out in planes: index bytes [0, 512), signs [512, 768), high
// bits [768, 832), scale nibbles [832, 864), the 8 blocks' d [864, 880).
__device__ uint32_t read_planar_group(const uint8_t* row, int g) {
  const uint2 low = *reinterpret_cast<const uint2*>(row + 8 * g);
  return low.x ^ low.y ^ *reinterpret_cast<const uint32_t*>(row + 512 + 4 * g) ^ row[768 + g] ^ row[832 + g / 2] ^
         u16(row + 864 + 2 * (g / 8));
}

// The gate/up kernel's reads, group by group, with ReadGroup (read_group or read_planar_group) for a group's
// fields: 2 rows of both matrices a warp, a lane's groups l and l + 32 of each row.
template <uint32_t (*ReadGroup)(const uint8_t*, int)>
__global__ void __launch_bounds__(256) gateup_by_group(Layer layer, Span* span, uint32_t* sink) {
  span_begin(span);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row = (blockIdx.x * 8 + warp) * 2;
  const size_t expert = layer.experts[blockIdx.y];
  uint32_t folded = 0;
  for (int g = lane; g < kGroups; g += 32) {
    for (int r = 0; r < 2; ++r) {
      const size_t offset = expert * kGateMatrixBytes + (row + r) * kGateRowBytes;
      folded ^= ReadGroup(layer.gate + offset, g) ^ ReadGroup(layer.up + offset, g);
    }
  }
  span_end(span, folded, sink);
}

__device__ uint32_t read_wide(const uint8_t* bytes, size_t n, int lane, int lanes) {
  uint32_t folded = 0;
  const auto* quads = reinterpret_cast<const uint4*>(bytes);
#pragma unroll 4
  for (size_t i = lane; i < n / 16; i += lanes) {
    const uint4 q = quads[i];
    folded ^= q.x ^ q.y ^ q.z ^ q.w;
  }
  return folded;
}

__global__ void __launch_bounds__(256) gateup_wide(Layer layer, Span* span, uint32_t* sink) {
  span_begin(span);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row = (blockIdx.x * 8 + warp) * 2;
  const size_t offset = layer.experts[blockIdx.y] * kGateMatrixBytes + row * kGateRowBytes;
  const uint32_t folded = read_wide(layer.gate + offset, 2 * kGateRowBytes, lane, 32) ^
                          read_wide(layer.up + offset, 2 * kGateRowBytes, lane, 32);
  span_end(span, folded, sink);
}

// blockIdx.y: the slot; the down matrix's bytes split over gridDim.x blocks.
__global__ void __launch_bounds__(256) down_wide(Layer layer, Span* span, uint32_t* sink) {
  span_begin(span);
  const size_t share = kDownMatrixBytes / gridDim.x;
  const uint8_t* first = layer.down + layer.experts[blockIdx.y] * kDownMatrixBytes + blockIdx.x * share;
  span_end(span, read_wide(first, share, threadIdx.x, blockDim.x), sink);
}

// All three matrices of the 8 experts: blockIdx.y the slot, each block a share of each (48 blocks a slot:
// ~3 an SM, as the gate/up kernel has).
__global__ void __launch_bounds__(256) all_wide(Layer layer, Span* span, uint32_t* sink) {
  span_begin(span);
  const size_t expert = layer.experts[blockIdx.y];
  const size_t gate_share = kGateMatrixBytes / gridDim.x, down_share = kDownMatrixBytes / gridDim.x;
  uint32_t folded =
      read_wide(layer.gate + expert * kGateMatrixBytes + blockIdx.x * gate_share, gate_share, threadIdx.x, blockDim.x);
  folded ^=
      read_wide(layer.up + expert * kGateMatrixBytes + blockIdx.x * gate_share, gate_share, threadIdx.x, blockDim.x);
  folded ^=
      read_wide(layer.down + expert * kDownMatrixBytes + blockIdx.x * down_share, down_share, threadIdx.x, blockDim.x);
  span_end(span, folded, sink);
}

void check(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return;
  std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(status));
  std::exit(1);
}

template <class Kernel>
void measure(const char* name, Kernel kernel, dim3 grid, const std::vector<Layer>& layers, double megabytes,
             uint32_t* sink) {
  const int launches = kLayers * kRepeats;
  Span* spans = nullptr;
  check(cudaMalloc(&spans, launches * sizeof(Span)), "spans");
  std::vector<Span> host(launches, Span{~0ull, 0ull});
  check(cudaMemcpy(spans, host.data(), launches * sizeof(Span), cudaMemcpyHostToDevice), "spans");
  for (int i = 0; i < launches; ++i) kernel<<<grid, 256>>>(layers[i % kLayers], spans + i, sink);
  check(cudaDeviceSynchronize(), name);
  check(cudaMemcpy(host.data(), spans, launches * sizeof(Span), cudaMemcpyDeviceToHost), "spans");
  cudaFree(spans);
  std::vector<double> us;
  for (int i = kLayers; i < launches; ++i) us.push_back((host[i].end - host[i].start) / 1000.0);  // warm-up left out
  std::sort(us.begin(), us.end());
  const double median = us[us.size() / 2];
  std::printf("%-14s %6.2f us (p10 %6.2f, p90 %6.2f)  %6.2f MB  %7.1f GB/s\n", name, median, us[us.size() / 10],
              us[us.size() * 9 / 10], megabytes, megabytes * 1e6 / (median * 1e3));
}

}  // namespace

int main() {
  const size_t gate_bytes = kGateMatrixBytes * kExperts, down_bytes = kDownMatrixBytes * kExperts;
  std::vector<Layer> layers(kLayers);
  std::mt19937 rng(7);
  uint32_t* sink = nullptr;
  check(cudaMalloc(&sink, sizeof(uint32_t)), "sink");
  for (Layer& layer : layers) {
    uint8_t* memory = nullptr;
    check(cudaMalloc(&memory, 2 * gate_bytes + down_bytes), "layer");
    check(cudaMemset(memory, 0x5a, 2 * gate_bytes + down_bytes), "layer");
    layer.gate = memory;
    layer.up = memory + gate_bytes;
    layer.down = memory + 2 * gate_bytes;
    std::vector<int> experts(kExperts);
    for (int e = 0; e < kExperts; ++e) experts[e] = e;
    std::shuffle(experts.begin(), experts.end(), rng);
    std::copy(experts.begin(), experts.begin() + kUsed, layer.experts);
  }
  const double gate_up_mb = 2.0 * kUsed * kGateMatrixBytes / 1e6, down_mb = 1.0 * kUsed * kDownMatrixBytes / 1e6;
  measure("gateup-narrow", gateup_by_group<read_group>, dim3(kFfn / 16, kUsed), layers, gate_up_mb, sink);
  measure("gateup-planar", gateup_by_group<read_planar_group>, dim3(kFfn / 16, kUsed), layers, gate_up_mb, sink);
  measure("gateup-wide", gateup_wide, dim3(kFfn / 16, kUsed), layers, gate_up_mb, sink);
  measure("down-wide", down_wide, dim3(32, kUsed), layers, down_mb, sink);
  measure("all-wide", all_wide, dim3(48, kUsed), layers, gate_up_mb + down_mb, sink);
  return 0;
}
