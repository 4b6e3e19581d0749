// Concurrent regions (strata/backend.h, ABI 1.3): the ops of a region are independent, so the matmuls (and
// route_experts) take turns over the lanes' streams. A lane joins the region when its first op comes (it
// waits for what the first lane had queued at concurrent_begin), and the first lane waits for every joined
// lane at concurrent_end. Inside a step graph's capture the same calls become the graph's fork and join edges.
#include <algorithm>

#include "backend_objects.hpp"
#include "cuda_status.hpp"
#include "ops.hpp"

void strata_backend::use_lane(int index) {
  current_lane = index;
  stream = lanes[index].stream;
  cublas = lanes[index].cublas;
}

void strata_backend::take_next_lane() {
  if (region_ops < 0) return;
  const int index = region_ops % strata::cuda::kStreamLanes;
  if (index != 0 && region_ops < strata::cuda::kStreamLanes) {
    strata::cuda::check(cudaStreamWaitEvent(lanes[index].stream, region_start), "concurrent region: starting a stream");
  }
  ++region_ops;  // only once the lane has joined: concurrent_end joins the lanes counted here
  use_lane(index);
}

namespace strata::cuda {

void concurrent_begin(strata_backend* backend) {
  auto& instance = deref(backend, "backend");
  if (instance.region_ops >= 0) invalid_argument("concurrent_begin: a concurrent region is already open");
  check(cudaEventRecord(instance.region_start, instance.lanes[0].stream), "concurrent region: marking its start");
  instance.region_ops = 0;
}

void concurrent_end(strata_backend* backend) {
  auto& instance = deref(backend, "backend");
  if (instance.region_ops < 0) invalid_argument("concurrent_end: no concurrent region is open");
  const int joined = std::min(instance.region_ops, kStreamLanes);
  instance.region_ops = -1;
  instance.use_lane(0);
  // Every lane is joined even after one failed (a broken capture), so that none stays forked; the first
  // failure is reported.
  cudaError_t first_failure = cudaSuccess;
  for (int index = 1; index < joined; ++index) {
    StreamLane& lane = instance.lanes[index];
    cudaError_t status = cudaEventRecord(lane.done, lane.stream);
    if (status == cudaSuccess) status = cudaStreamWaitEvent(instance.lanes[0].stream, lane.done);
    if (first_failure == cudaSuccess) first_failure = status;
  }
  check(first_failure, "concurrent region: joining its streams");
}

}  // namespace strata::cuda
