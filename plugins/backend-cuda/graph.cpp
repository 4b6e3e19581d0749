// Step graphs (strata/backend.h, ABI 1.1) as CUDA graphs. The first step a graph brackets runs as usual,
// so that every scratch reaches its size; the second is captured and launched as one graph; later steps
// only launch it. A decode step is hundreds of small kernels, and one graph launch replaces their launch
// costs. The step's positions live in pinned host memory that the graph's first node copies to the device,
// so a replay picks up the new ones; kernels loop over the cache up to them, so no launch size changes.
#include <cstring>
#include <string>
#include <vector>

#include "backend_objects.hpp"
#include "cuda_status.hpp"
#include "ops.hpp"

struct strata_graph {
  enum class State { fresh, warm, recorded, disabled };
  State state = State::fresh;
  int32_t mode = STRATA_GRAPH_RUN;  // of the step in progress
  std::vector<int32_t> positions;   // the step's, to check the ops' against while recording
  // What the graph's first node copies to device_positions (its size never changes: the recording keeps it).
  strata::cuda::PinnedHostBuffer pinned_positions{"step graph positions"};
  strata::cuda::DeviceAllocation device_positions;
  cudaGraphExec_t exec = nullptr;
  cudaEvent_t launched = nullptr;  // the last launch, which reads pinned_positions

  ~strata_graph() {
    if (exec != nullptr) cudaGraphExecDestroy(exec);
    if (launched != nullptr) cudaEventDestroy(launched);
  }
};

namespace strata::cuda {
namespace {

void prepare_recording(strata_backend& backend, strata_graph& graph, int32_t n_positions) {
  if (graph.device_positions.get() != nullptr) return;
  const size_t bytes = static_cast<size_t>(n_positions) * sizeof(int32_t);
  graph.pinned_positions.get(bytes);
  graph.device_positions = backend.budget.allocate(bytes, "step graph positions");
  check(cudaEventCreateWithFlags(&graph.launched, cudaEventDisableTiming), "step graph: creating an event");
}

void launch(strata_backend& backend, strata_graph& graph) {
  backend.weight_writes.await_all(backend.stream);  // a replay reads what the ops' fences would have waited for
  check(cudaGraphLaunch(graph.exec, backend.stream), "launching a step graph");
  check(cudaEventRecord(graph.launched, backend.stream), "step graph: recording its launch");
}

// Ends the capture in progress; returns the captured graph or throws.
cudaGraph_t end_capture(strata_backend& backend) {
  cudaGraph_t captured = nullptr;
  const cudaError_t status = cudaStreamEndCapture(backend.stream, &captured);
  backend.recording = nullptr;
  if (status != cudaSuccess && captured != nullptr) cudaGraphDestroy(captured);
  check(status, "ending a step graph capture");
  return captured;
}

}  // namespace

void graph_create(strata_backend* backend, strata_graph** out) {
  deref(backend, "backend");
  *&deref(out, "out") = new strata_graph();
}

void graph_free(strata_backend* backend, strata_graph* graph) {
  if (backend != nullptr && graph != nullptr) cudaStreamSynchronize(backend->stream);
  delete graph;
}

void graph_begin(strata_backend* backend, strata_graph* graph, const int32_t* positions, int32_t n_positions,
                 int32_t* mode) {
  auto& instance = deref(backend, "backend");
  auto& g = deref(graph, "graph");
  int32_t& chosen = deref(mode, "mode");
  if (n_positions <= 0 || positions == nullptr) invalid_argument("graph_begin: no positions");
  if (instance.recording != nullptr) invalid_argument("graph_begin: another graph is recording");
  if (instance.region_ops >= 0) invalid_argument("graph_begin: inside a concurrent region");
  if (!g.positions.empty() && n_positions != static_cast<int32_t>(g.positions.size())) {
    invalid_argument("graph_begin: " + std::to_string(n_positions) + " positions for a graph of " +
                     std::to_string(g.positions.size()));
  }
  g.positions.assign(positions, positions + n_positions);
  const size_t bytes = static_cast<size_t>(n_positions) * sizeof(int32_t);
  switch (g.state) {
    case strata_graph::State::fresh:
      g.state = strata_graph::State::warm;
      [[fallthrough]];
    case strata_graph::State::disabled:
      g.mode = STRATA_GRAPH_RUN;
      break;
    case strata_graph::State::recorded:
      // The previous launch must have read the pinned positions before they are overwritten.
      check(cudaEventSynchronize(g.launched), "step graph: waiting for its last launch");
      std::memcpy(g.pinned_positions.get(bytes), positions, bytes);
      g.mode = STRATA_GRAPH_REPLAY;
      break;
    case strata_graph::State::warm:
      prepare_recording(instance, g, n_positions);
      std::memcpy(g.pinned_positions.get(bytes), positions, bytes);
      instance.weight_writes.await_all(instance.stream);  // outside the capture: its ops then wait for none
      check(cudaStreamBeginCapture(instance.stream, cudaStreamCaptureModeRelaxed), "starting a step graph capture");
      instance.recording = &g;
      try {
        check(cudaMemcpyAsync(g.device_positions.get(), g.pinned_positions.get(bytes), bytes, cudaMemcpyHostToDevice,
                              instance.stream),
              "step graph: copying its positions");
      } catch (...) {
        graph_discard(backend, graph);
        throw;
      }
      g.mode = STRATA_GRAPH_RECORD;
      break;
  }
  chosen = g.mode;
}

void graph_end(strata_backend* backend, strata_graph* graph) {
  auto& instance = deref(backend, "backend");
  auto& g = deref(graph, "graph");
  if (g.mode == STRATA_GRAPH_REPLAY) {
    launch(instance, g);
  } else if (g.mode == STRATA_GRAPH_RECORD) {
    if (instance.recording != &g) invalid_argument("graph_end: the graph is not recording");
    g.mode = STRATA_GRAPH_RUN;
    g.state = strata_graph::State::disabled;  // until the recording has launched
    cudaGraph_t captured = end_capture(instance);
    const cudaError_t status = cudaGraphInstantiate(&g.exec, captured, 0);
    cudaGraphDestroy(captured);
    check(status, "instantiating a step graph");
    launch(instance, g);
    g.state = strata_graph::State::recorded;
  }
  g.mode = STRATA_GRAPH_RUN;
}

void graph_discard(strata_backend* backend, strata_graph* graph) {
  if (backend == nullptr || graph == nullptr) return;
  if (backend->recording == graph) {
    cudaGraph_t captured = nullptr;
    cudaStreamEndCapture(backend->stream, &captured);
    if (captured != nullptr) cudaGraphDestroy(captured);
    (void)cudaGetLastError();
    backend->recording = nullptr;
  }
  graph->state = strata_graph::State::disabled;
  graph->mode = STRATA_GRAPH_RUN;
}

// Only copies write positions, never a kernel: kernels may read them before their programmatic-launch wait
// (attention does), since a copy starts only when the kernels queued before it have ended.
const int32_t* device_positions(strata_backend& backend, const int32_t* positions, int32_t n) {
  const strata_graph* graph = backend.recording;
  if (graph == nullptr) return backend.upload(backend.lane().positions, positions, static_cast<size_t>(n));
  if (n != static_cast<int32_t>(graph->positions.size()) ||
      std::memcmp(positions, graph->positions.data(), static_cast<size_t>(n) * sizeof(int32_t)) != 0) {
    invalid_argument("an op's positions differ from those of the step graph recording it");
  }
  return graph->device_positions.as<const int32_t>();
}

}  // namespace strata::cuda
