/* Compute backends, ABI version 1 (see strata/plugin.h for the compatibility rules).
 *
 * A backend plugin's descriptor->table points to a strata_backend_table. The core walks a model's layers
 * and calls these ops; the backend owns its memory, threads and streams. Activations live in backend
 * buffers as float32, row-major [rows][width]. Weights are GGUF tensors the backend may keep in place
 * (the CPU reads the memory-mapped file) or copy (a GPU uploads them). Small host-side inputs (token
 * ids, positions) are passed as host pointers. Ops run in call order; buffer_read waits for them.
 *
 * Every op computes the same function on every backend, up to float reassociation.
 */
#ifndef STRATA_BACKEND_H
#define STRATA_BACKEND_H

#include "strata/plugin.h"
#include "strata/quant.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct strata_backend strata_backend; /* one backend instance */
typedef struct strata_buffer strata_buffer;   /* float32 activations (or int32 ids) in backend memory */
typedef struct strata_weight strata_weight;   /* one weight tensor, quantized or not */
typedef struct strata_kv_cache strata_kv_cache;
typedef struct strata_graph strata_graph; /* a recorded step (ABI 1.1) */
/* A backend's named optional function (get_proc_address, ABI 1.7), cast to its documented signature. */
typedef void (*strata_proc)(void);

/* The most CPU threads a host asks a backend for (n_threads); a backend refuses more. Fixed rather than
 * derived from the machine, so that a command valid on one machine is valid on all: the largest servers
 * have fewer hardware threads (2 sockets x 192 cores x 2 = 768), and starting ten thousand threads takes
 * seconds to run no faster. */
#define STRATA_MAX_THREADS 1024

/* What the host gives a backend instance. */
typedef struct strata_backend_config {
  uint32_t struct_size;
  int32_t n_threads;        /* CPU worker threads, at most STRATA_MAX_THREADS; <= 0: the backend's default
                             * (physical cores) */
  const char* options_json; /* backend-specific options as a JSON object text ("{}" when none) */
  /* The quant types the host resolved (manifest preferences applied): the backend finds each weight
   * type's codec and kernels here. Returns NULL for a type nothing provides. */
  void* quant_context;
  const strata_quant_type* (*find_quant_type)(void* quant_context, uint32_t type_id);
} strata_backend_config;

/* A weight tensor: ne0 values per row (the input dimension), ne1 rows (outputs), ne2 matrices (experts;
 * 1 for a dense weight). Rows are contiguous and whole blocks of its type. */
typedef struct strata_weight_desc {
  uint32_t struct_size;
  const char* name; /* the GGUF tensor name, for messages */
  uint32_t type;    /* GGUF type id */
  int64_t ne0, ne1, ne2;
  const void* data; /* host bytes; valid until weight_free */
} strata_weight_desc;

enum {
  STRATA_KV_F16 = 1, /* keys and values stored as IEEE half */
  STRATA_KV_INT8 = 2 /* int8 with one float scale per head per position */
};

typedef struct strata_kv_config {
  uint32_t struct_size;
  int32_t n_layers;
  int32_t n_ctx; /* positions per sequence */
  int32_t n_head_kv;
  int32_t head_dim;
  int32_t kv_type; /* STRATA_KV_* */
} strata_kv_config;

/* Attention over one sequence's cache: the ops store this step's keys and values at their positions,
 * then attend causally (position p sees cache positions 0..p) with grouped query heads. */
typedef struct strata_attention_params {
  uint32_t struct_size;
  int32_t layer;
  int32_t n_tokens;
  int32_t n_head;
  int32_t n_head_kv;
  int32_t head_dim;
  float scale;              /* usually 1/sqrt(head_dim) */
  const int32_t* positions; /* host, n_tokens entries */
} strata_attention_params;

/* ABI 1.2: how attention_rope prepares q and k before attending: every head RMS-normalized with its norm
 * weight where one is given (as rms_norm over rows of head_dim), then NEOX-rotated by position (as
 * rope_neox with n_rot and rope_base). */
typedef struct strata_qk_prepare {
  uint32_t struct_size;
  const strata_weight* q_norm; /* NULL or f32 [head_dim] */
  const strata_weight* k_norm; /* NULL or f32 [head_dim] */
  float norm_eps;
  int32_t n_rot;
  float rope_base;
} strata_qk_prepare;

enum {
  STRATA_ROUTING_SOFTMAX_TOPK = 1,     /* softmax over all experts, then take the top k */
  STRATA_ROUTING_SOFTMAX_TOPK_NORM = 2 /* as above, then the k weights renormalized to sum to 1 */
};

enum { STRATA_UNARY_SILU = 1, STRATA_UNARY_SIGMOID = 2 };

/* ABI 1.5: the input of an op that reads the residual stream through an RMS norm (matmul_normed,
 * route_experts_normed): rms_norm(x + y) over rows x width (x alone where y is NULL) with weight and eps,
 * as add_rms_norm computes it, width being the op's input width. */
typedef struct strata_normed_input {
  uint32_t struct_size;
  const strata_buffer* x;      /* the residual stream */
  const strata_buffer* y;      /* NULL, or a block's output still to be added to x */
  const strata_weight* weight; /* F32 [width] */
  float eps;
  strata_buffer* sum;    /* NULL, or where the op also writes x + y (x where y is NULL; neither x nor y) */
  strata_buffer* normed; /* NULL, or where the op also writes the norm's rows (neither x, y nor sum) */
} strata_normed_input;

typedef struct strata_backend_table {
  uint32_t struct_size;

  /* Lifetime. */
  strata_status (*create)(const strata_backend_config* config, strata_backend** out, strata_error* error);
  void (*destroy)(strata_backend* backend);
  /* One line describing the instance (device, threads, instruction set), for logs and benchmarks. */
  const char* (*describe)(strata_backend* backend);

  /* Memory. */
  strata_status (*buffer_alloc)(strata_backend* backend, size_t bytes, strata_buffer** out, strata_error* error);
  void (*buffer_free)(strata_backend* backend, strata_buffer* buffer);
  strata_status (*buffer_write)(strata_backend* backend, strata_buffer* buffer, size_t offset, const void* src,
                                size_t bytes, strata_error* error);
  strata_status (*buffer_read)(strata_backend* backend, strata_buffer* buffer, size_t offset, void* dst, size_t bytes,
                               strata_error* error);

  strata_status (*weight_load)(strata_backend* backend, const strata_weight_desc* desc, strata_weight** out,
                               strata_error* error);
  void (*weight_free)(strata_backend* backend, strata_weight* weight);

  strata_status (*kv_create)(strata_backend* backend, const strata_kv_config* config, strata_kv_cache** out,
                             strata_error* error);
  void (*kv_free)(strata_backend* backend, strata_kv_cache* cache);

  /* Ops. Shapes are given in rows x width; out may alias an input only where noted. */

  /* out[t] = row ids[t] of table (dequantized); table ne2 == 1. */
  strata_status (*get_rows)(strata_backend* backend, const strata_weight* table, const int32_t* ids, int32_t n_ids,
                            strata_buffer* out, strata_error* error);
  /* out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * weight (an F32 vector of width values). out may be x. */
  strata_status (*rms_norm)(strata_backend* backend, const strata_buffer* x, const strata_weight* weight, int32_t rows,
                            int32_t width, float eps, strata_buffer* out, strata_error* error);
  /* out[t][o] = sum_i W[expert][o][i] * x[t][i] (+ bias[o] when bias is not NULL), o < ne1, i < ne0. */
  strata_status (*matmul)(strata_backend* backend, const strata_weight* w, int32_t expert, const strata_buffer* x,
                          int32_t n_tokens, const strata_weight* bias, strata_buffer* out, strata_error* error);
  /* NEOX rotary embedding, in place, on x = [n_tokens][n_heads][head_dim]: the first n_rot dims of each
   * head rotate in pairs (i, i + n_rot/2) by position * base^(-2i/n_rot). */
  strata_status (*rope_neox)(strata_backend* backend, strata_buffer* x, const int32_t* positions, int32_t n_tokens,
                             int32_t n_heads, int32_t head_dim, int32_t n_rot, float base, strata_error* error);
  /* q = [n_tokens][n_head][head_dim], k and v = [n_tokens][n_head_kv][head_dim];
   * out = [n_tokens][n_head][head_dim]. */
  strata_status (*attention)(strata_backend* backend, strata_kv_cache* cache, const strata_attention_params* params,
                             const strata_buffer* q, const strata_buffer* k, const strata_buffer* v, strata_buffer* out,
                             strata_error* error);
  /* Router: from logits [n_tokens][n_experts] picks n_used experts per token; ids (int32) and weights
   * (float) are [n_tokens][n_used], best first. */
  strata_status (*route)(strata_backend* backend, const strata_buffer* logits, int32_t n_tokens, int32_t n_experts,
                         int32_t n_used, int32_t routing, strata_buffer* ids, strata_buffer* weights,
                         strata_error* error);
  /* Mixture of experts with SwiGLU experts: out[t] = sum_j weights[t][j] *
   * down[e](silu(gate[e] x[t]) * up[e] x[t]), e = ids[t][j]. gate/up: ne0 = width, ne1 = ffn;
   * down: ne0 = ffn, ne1 = width; ne2 = experts. A pair whose weight is 0 adds nothing, and a backend need
   * not compute it: the core hands a pair to another tier (docs/experts.md) by zeroing its weight here. Its id
   * must still be in range (a backend that computes it reads that expert). */
  strata_status (*moe_ffn)(strata_backend* backend, const strata_buffer* x, int32_t n_tokens, int32_t n_used,
                           const strata_buffer* ids, const strata_buffer* weights, const strata_weight* gate,
                           const strata_weight* up, const strata_weight* down, strata_buffer* out, strata_error* error);
  /* out = a + b, elementwise over n values. out may be a or b. */
  strata_status (*add)(strata_backend* backend, const strata_buffer* a, const strata_buffer* b, int64_t n,
                       strata_buffer* out, strata_error* error);
  /* out = a * b, elementwise over n values. out may be a or b. */
  strata_status (*mul)(strata_backend* backend, const strata_buffer* a, const strata_buffer* b, int64_t n,
                       strata_buffer* out, strata_error* error);
  /* out = f(x) elementwise (STRATA_UNARY_*). out may be x. */
  strata_status (*unary)(strata_backend* backend, int32_t op, const strata_buffer* x, int64_t n, strata_buffer* out,
                         strata_error* error);
  /* x[r][c] *= scale[r] for rows x width, in place. */
  strata_status (*scale_rows)(strata_backend* backend, strata_buffer* x, const strata_buffer* scale, int32_t rows,
                              int32_t width, strata_error* error);

  /* ABI 1.1. Step graphs: optional, all five NULL when a backend has none (the core then calls the ops of
   * every step). A decode step calls the same ops on the same buffers every time; only its positions
   * change. The core owns graphs per such step shape, each bracketing the same run of the step's ops
   * every time (a step may be cut into several):
   *   graph_begin(graph, positions, n_positions, &mode), then by mode:
   *   STRATA_GRAPH_RUN     the core calls the ops and they run as usual; then graph_end.
   *   STRATA_GRAPH_RECORD  the core calls the ops; the backend may record them instead of running them,
   *                        graph_end then runs the recording. Positions given to ops must be the ones given
   *                        to graph_begin. If an op fails, the core calls graph_discard instead of graph_end:
   *                        nothing of the step has run, the graph answers RUN from then on, and the core
   *                        calls the step's ops again.
   *   STRATA_GRAPH_REPLAY  the core calls no ops: graph_end runs the recording again, with these positions in
   *                        place of the recorded ones, on the current contents of the recorded buffers.
   * The core guarantees that a graph only ever brackets the same ops with the same arguments apart from
   * positions (and n_positions stays the same). */
  strata_status (*graph_create)(strata_backend* backend, strata_graph** out, strata_error* error);
  void (*graph_free)(strata_backend* backend, strata_graph* graph);
  strata_status (*graph_begin)(strata_backend* backend, strata_graph* graph, const int32_t* positions,
                               int32_t n_positions, int32_t* mode, strata_error* error);
  strata_status (*graph_end)(strata_backend* backend, strata_graph* graph, strata_error* error);
  void (*graph_discard)(strata_backend* backend, strata_graph* graph);

  /* ABI 1.2, optional (NULL: the core calls rms_norm and rope_neox on q and k itself, then attention).
   * attention with q and k first prepared as strata_qk_prepare says, in one op so that a backend can fuse
   * the preparation into its attention kernels. q and k hold unspecified values afterwards. */
  strata_status (*attention_rope)(strata_backend* backend, strata_kv_cache* cache,
                                  const strata_attention_params* params, const strata_qk_prepare* prepare,
                                  strata_buffer* q, strata_buffer* k, const strata_buffer* v, strata_buffer* out,
                                  strata_error* error);
  /* ABI 1.2, optional (NULL: the core calls add, then rms_norm). The residual step between blocks:
   * x += y over rows x width, then out = rms_norm of the new x with weight and eps (as rms_norm).
   * out must be neither x nor y. */
  strata_status (*add_rms_norm)(strata_backend* backend, strata_buffer* x, const strata_buffer* y,
                                const strata_weight* weight, int32_t rows, int32_t width, float eps, strata_buffer* out,
                                strata_error* error);

  /* ABI 1.3, optional (NULL: ops run one after another). The ops called between concurrent_begin and
   * concurrent_end are independent: none reads or writes a buffer (or cache) that another of them writes.
   * The backend may run them at once (a GPU on several streams); after concurrent_end, later ops see all of
   * their results, as after any op. Regions do not nest; buffer_read, buffer_write and the graph entries
   * are not called inside one. */
  strata_status (*concurrent_begin)(strata_backend* backend, strata_error* error);
  strata_status (*concurrent_end)(strata_backend* backend, strata_error* error);

  /* ABI 1.3, optional (NULL: the core calls matmul, then route). The router of a mixture of experts in one
   * op, so that a backend can fuse the product and the choice: logits = matmul(router, x) over n_tokens rows
   * (no bias), then route(logits) into ids and weights as route does. router is one matrix (ne2 == 1) of
   * n_experts rows (ne1 == n_experts); logits ([n_tokens][n_experts]) must not be x. */
  strata_status (*route_experts)(strata_backend* backend, const strata_buffer* x, const strata_weight* router,
                                 int32_t n_tokens, int32_t n_experts, int32_t n_used, int32_t routing,
                                 strata_buffer* logits, strata_buffer* ids, strata_buffer* weights,
                                 strata_error* error);

  /* ABI 1.4, optional (NULL: the core reads into heap memory). bytes of host memory that buffer_read fills
   * fastest (a GPU: page-locked memory, which a copy reaches directly instead of through a staging copy),
   * for what the core reads every step (a decode step's logits). host_free takes what host_alloc returned,
   * before the backend is destroyed. */
  strata_status (*host_alloc)(strata_backend* backend, size_t bytes, void** out, strata_error* error);
  void (*host_free)(strata_backend* backend, void* memory);

  /* ABI 1.5, optional, both or neither (NULL: the core calls add_rms_norm into a buffer, then matmul and
   * route_experts on it). matmul (of w's first matrix) and route_experts on the rms_norm of a residual
   * stream, which the op computes itself (strata_normed_input), so that a backend can fuse the norm into the
   * kernels that read it: in a decode step every block of the matvec can normalize the few rows it reads
   * instead of waiting for a norm kernel between the block that wrote y and it. Several such ops may read one
   * x and y inside a concurrent region, where at most one of them writes sum or normed. */
  strata_status (*matmul_normed)(strata_backend* backend, const strata_weight* w, const strata_normed_input* in,
                                 int32_t n_tokens, const strata_weight* bias, strata_buffer* out, strata_error* error);
  strata_status (*route_experts_normed)(strata_backend* backend, const strata_normed_input* in,
                                        const strata_weight* router, int32_t n_tokens, int32_t n_experts,
                                        int32_t n_used, int32_t routing, strata_buffer* logits, strata_buffer* ids,
                                        strata_buffer* weights, strata_error* error);

  /* ABI 1.7, optional (NULL: the backend has no named functions). The backend's optional function called name,
   * or NULL when this instance has none by that name. Optional entries added after 1.7 (fused ops above all)
   * are named functions instead of fields of this table, so that one needs no ABI minor of its own: each name
   * is defined below as a STRATA_BACKEND_PROC_* string with its signature, and a name never changes its
   * signature (a new signature takes a new name). The answer may depend on the instance (its device, its
   * options) but stays the same for its whole life, so the core may ask once. Cannot fail. */
  strata_proc (*get_proc_address)(strata_backend* backend, const char* name);
} strata_backend_table;

enum { STRATA_GRAPH_RUN = 0, STRATA_GRAPH_RECORD = 1, STRATA_GRAPH_REPLAY = 2 };

/* Named optional functions (get_proc_address): each is a #define STRATA_BACKEND_PROC_<NAME> "<name>" with a
 * typedef of its signature, strata_backend_<name>_fn, taking the instance first and a strata_error* last; its
 * arguments beyond a few scalars go in a struct that starts with struct_size, so that it can grow by appending. */

/* Expert caches (hybrid expert placement, docs/experts.md). A backend that offers weight_alloc offers
 * weight_write and weight_writes_done too; memory_info stands alone.
 *
 * "weight_alloc": a weight of desc's type and shape (desc->data is ignored and may be NULL) whose matrices the
 * core fills with weight_write: the slots of an expert cache, refilled as it runs, so kept in the file's layout
 * (a conversion on the host would cost more than the copy). Its matrices read as zeros until written. It takes
 * the backend's memory (a GPU's VRAM) and is freed with weight_free. */
#define STRATA_BACKEND_PROC_WEIGHT_ALLOC "weight_alloc"
typedef strata_status (*strata_backend_weight_alloc_fn)(strata_backend* backend, const strata_weight_desc* desc,
                                                        strata_weight** out, strata_error* error);

/* "weight_write": copies one matrix in the file's layout (ne1 rows of the weight's type, as a GGUF tensor holds
 * them; a backend converts them to its own layout) into matrix `matrix` of a weight from weight_alloc. */
typedef struct strata_weight_write {
  uint32_t struct_size;
  int64_t matrix; /* which matrix (expert slot), < ne2 */
  /* host bytes of one matrix; the backend may read them until the copy lands (a GPU reads page-locked memory
   * directly): they stay as they are until the ops called after an ordered write have run, or until
   * weight_writes_done answered 1 after a background one */
  const void* data;
  /* 0: ordered like buffer_write: after the ops called before the call (which still see the old bytes) and
   *    before those called after it that read the weight (a GPU may copy beside those that do not).
   * 1: in the background (a GPU: on a copy stream): the copy starts after the ops called before it and runs
   *    beside the ops called after it, which must not read the matrix until weight_writes_done answered 1
   *    after the call; data must stay valid until then. */
  int32_t background;
} strata_weight_write;
#define STRATA_BACKEND_PROC_WEIGHT_WRITE "weight_write"
typedef strata_status (*strata_backend_weight_write_fn)(strata_backend* backend, strata_weight* weight,
                                                        const strata_weight_write* write, strata_error* error);

/* "weight_writes_done": *done = 1 when every background weight_write called so far has finished (its matrix
 * may be read by the ops called from then on), else 0. Never waits. */
#define STRATA_BACKEND_PROC_WEIGHT_WRITES_DONE "weight_writes_done"
typedef strata_status (*strata_backend_weight_writes_done_fn)(strata_backend* backend, int32_t* done,
                                                              strata_error* error);

/* "memory_info": the memory of the instance's device that its allocations (weights, buffers, caches, scratch)
 * count against: limit_bytes in all (a GPU: the VRAM free at start less the reserve, or less where the option
 * memory_budget_mib caps it) and used_bytes now. */
typedef struct strata_memory_info {
  uint32_t struct_size;
  uint64_t limit_bytes;
  uint64_t used_bytes;
} strata_memory_info;
#define STRATA_BACKEND_PROC_MEMORY_INFO "memory_info"
typedef strata_status (*strata_backend_memory_info_fn)(strata_backend* backend, strata_memory_info* info,
                                                       strata_error* error);

/* "buffer_reads": several buffer_reads with one wait, for a step that needs a few small results on the host at
 * once (a hybrid placement's split layer: the routing and the pool's input). Each of the count items reads as
 * buffer_read would, all after the ops called before the call; a GPU queues the copies and waits once. An item
 * names a buffer_read's arguments and never grows (a new layout takes a new name). */
typedef struct strata_buffer_read_item {
  strata_buffer* buffer;
  size_t offset;
  void* dst;
  size_t bytes;
} strata_buffer_read_item;
typedef struct strata_buffer_reads {
  uint32_t struct_size;
  int32_t count;
  const strata_buffer_read_item* items;
} strata_buffer_reads;
#define STRATA_BACKEND_PROC_BUFFER_READS "buffer_reads"
typedef strata_status (*strata_backend_buffer_reads_fn)(strata_backend* backend, const strata_buffer_reads* reads,
                                                        strata_error* error);

/* "signalled_write": a buffer_write whose bytes another host thread is still making. It is ordered like
 * buffer_write (after the ops called before it; the ops called after it see the bytes), but the copy waits until
 * the 64-bit value at signal is at least value, which that thread stores (a release store, after the bytes). A
 * GPU waits on the device and returns at once, so that the caller queues later ops while, say, a hybrid
 * placement's expert pool computes the bytes; a backend that runs ops as they are called (the CPU's) waits in
 * the call. src and signal lie in host_alloc memory where the backend has it; src stays as it is until the ops
 * called after the write have run (a later buffer_read has returned). The other thread must signal on every
 * path, its errors included: a backend waits at most 60 s, then fails (a GPU: a device-side trap, a sticky
 * error) rather than hang. */
typedef struct strata_signalled_write {
  uint32_t struct_size;
  strata_buffer* buffer;
  size_t offset;
  const void* src;
  size_t bytes;
  const volatile uint64_t* signal;
  uint64_t value;
} strata_signalled_write;
#define STRATA_BACKEND_PROC_SIGNALLED_WRITE "signalled_write"
typedef strata_status (*strata_backend_signalled_write_fn)(strata_backend* backend, const strata_signalled_write* write,
                                                           strata_error* error);

/* "thread_count": the CPU threads the instance computes on (a CPU backend: its pool, the calling thread
 * included), for a server's gauges and logs. */
#define STRATA_BACKEND_PROC_THREAD_COUNT "thread_count"
typedef strata_status (*strata_backend_thread_count_fn)(strata_backend* backend, int32_t* threads, strata_error* error);

#ifdef __cplusplus
}
#endif

#endif /* STRATA_BACKEND_H */
