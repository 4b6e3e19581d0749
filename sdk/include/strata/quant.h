/* Quantization types, ABI version 1 (see strata/plugin.h for the compatibility rules).
 *
 * A quant plugin's descriptor->table points to a strata_quant_table. Each type is identified by its GGUF
 * (ggml) type id and describes one block format: block_elements values stored in block_bytes bytes.
 * Tensors are stored as rows; a row holds a whole number of blocks.
 */
#ifndef STRATA_QUANT_H
#define STRATA_QUANT_H

#include "strata/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ABI 1.1: the expert products of a mixture-of-experts layer for a few tokens, in one launch (all pointers
 * are device memory). Expert e's matrix starts expert_bytes after expert e - 1's; slot s = token *
 * slots_per_token + choice uses expert expert_ids[s]. An id outside 0..n_experts-1 yields NaN outputs
 * instead of reading outside the weights. */
enum {
  /* out[s][r] = silu(dot(W[e_s] row r, x[t])) * dot(W2[e_s] row r, x[t]), t = s / slots_per_token:
   * the gate and up halves of SwiGLU experts (W2 has W's type and layout); x is [tokens][n]. */
  STRATA_EXPERT_MATVEC_SWIGLU = 1,
  /* out[t][r] = sum over choices j, in order, of slot_weights[s] * dot(W[e_s] row r, x[s]),
   * s = t * slots_per_token + j: the down projections combined; x is [slots][n]. */
  STRATA_EXPERT_MATVEC_WEIGHTED_SUM = 2
};

typedef struct strata_cuda_expert_matvec {
  uint32_t struct_size;
  int32_t mode;        /* STRATA_EXPERT_MATVEC_* */
  const void* weight;  /* n_experts matrices of n_rows rows of n values */
  const void* weight2; /* SWIGLU: the up matrices; otherwise NULL */
  int64_t n, n_rows;
  size_t row_bytes, expert_bytes;
  int32_t n_experts;
  int32_t n_slots;
  int32_t slots_per_token;
  const int32_t* expert_ids; /* [n_slots] */
  const float* slot_weights; /* WEIGHTED_SUM: [n_slots]; otherwise NULL */
  const float* x;
  float* out;
  /* ABI 1.2 (read where struct_size covers them): x already rounded to 8 bits as for cuda_matvec_q8, rows
   * as x's, or NULL. A launcher of an older plugin ignores them and reads x, which stays set. */
  const int8_t* x_levels;
  const float* x_scales;
} strata_cuda_expert_matvec;

/* ABI 1.1: products for many tokens on the tensor cores, grouped by expert (a dense weight is one expert).
 * Tile t (t < *tile_count, on the device) is tiles[3t..3t+2] = {expert, first, count}: rows first ..
 * first + count - 1 (count <= STRATA_GEMM_TILE_TOKENS) of x multiply expert's matrix:
 * out[first + i][r] = dot(W[expert] row r, x[first + i]) for r < n_rows. x holds IEEE half rows of n
 * values (n a multiple of 32); out is float32 [rows][n_rows]. */
#define STRATA_GEMM_TILE_TOKENS 64

typedef struct strata_cuda_grouped_gemm {
  uint32_t struct_size;
  const void* weight;
  int64_t n, n_rows;
  size_t row_bytes, expert_bytes;
  int32_t n_experts;
  int32_t max_tiles; /* the launch covers this many tiles; those past *tile_count do nothing */
  const int32_t* tiles;
  const int32_t* tile_count;
  const uint16_t* x;
  float* out;
} strata_cuda_grouped_gemm;

/* ABI 1.5: activations that are the RMS norm of a residual stream, which the kernel computes itself from
 * the rows it reads (see strata_backend_table::matmul_normed): row t of the activations is
 * (x[t] + y[t]) / sqrt(mean((x[t] + y[t])^2) + eps) * gain, with y = 0 where y is NULL. All device memory. */
typedef struct strata_cuda_normed_rows {
  uint32_t struct_size;
  const float* x;    /* [n_tokens][n] */
  const float* y;    /* NULL, or [n_tokens][n] added to x first */
  const float* gain; /* the norm's n weights */
  float eps;
  float* sum; /* NULL, or where the launch writes x + y (x where y is NULL; neither x nor y) */
} strata_cuda_normed_rows;

typedef struct strata_quant_type {
  uint32_t struct_size;
  uint32_t type_id;        /* GGUF type id, e.g. 21 for IQ3_S */
  const char* name;        /* GGUF name, e.g. "IQ3_S" */
  uint32_t block_elements; /* values per block */
  uint32_t block_bytes;    /* bytes per block */
  /* Exact reference dequantization of n_blocks consecutive blocks into n_blocks*block_elements floats. */
  strata_status (*dequantize)(const void* blocks, float* out, int64_t n_blocks, strata_error* error);
  /* Quantizes n_rows rows of n_per_row values (n_per_row a multiple of block_elements) into
   * n_rows * n_per_row / block_elements blocks. importance is NULL or n_per_row non-negative weights
   * saying how much each column's error matters (an importance matrix); the quantizer minimizes the
   * weighted squared error. May be NULL when the type cannot be produced. */
  strata_status (*quantize)(const float* src, void* blocks, int64_t n_rows, int64_t n_per_row, const float* importance,
                            strata_error* error);

  /* CPU kernels; optional (zero / NULL when absent: the CPU backend then dequantizes weight rows and
   * multiplies in float32). */
  /* The type the CPU backend converts an activation row to (with that type's quantize) before calling
   * cpu_dot_rows, e.g. Q8_K (15) for k-quants and IQ3, Q8_0 (8) for Q8_0, F32 (0) for float weights. */
  uint32_t cpu_activation_type;
  /* out[r] = dot(weight row r, activation) for r < n_rows; each row has n values (whole blocks) and
   * starts row_bytes after the previous one; activation is one row of n values in cpu_activation_type.
   * Must be thread-safe: the backend calls it from several threads on disjoint rows. */
  void (*cpu_dot_rows)(int64_t n, int64_t n_rows, const void* weight, size_t row_bytes, const void* activation,
                       float* out);

  /* CUDA kernels; optional (NULL when the plugin was built without CUDA: a CUDA backend then uses its own
   * kernels for the type or refuses it). Pointers are device memory of the current device; stream is a
   * cudaStream_t. Plugins and backends link the shared CUDA runtime so that streams and memory are one.
   * A launcher only enqueues work; errors it can see at launch are returned. */
  /* out (f16, IEEE half bits) = n_blocks dequantized blocks. */
  strata_status (*cuda_dequantize_f16)(const void* blocks, uint16_t* out, int64_t n_blocks, void* stream,
                                       strata_error* error);
  /* out[t][r] = dot(weight row r, x[t]) for r < n_rows, t < n_tokens (small: the decode path, 1 to 8);
   * rows hold n values and are row_bytes apart; x and out are float32 row-major. */
  strata_status (*cuda_matvec)(const void* weight, int64_t n, int64_t n_rows, size_t row_bytes, const float* x,
                               int64_t n_tokens, float* out, void* stream, strata_error* error);

  /* Optional (NULL when absent: the CPU backend then calls cpu_dot_rows once per token). The same products
   * for several tokens in one pass over the weight rows, so that a kernel decodes each block once for all
   * of them: out[t * out_stride + r] = dot(weight row r, activation row t) for r < n_rows, t < n_tokens;
   * activation row t starts activation_stride bytes after row t - 1. Thread-safe as cpu_dot_rows. */
  void (*cpu_dot_rows_multi)(int64_t n, int64_t n_rows, const void* weight, size_t row_bytes, const void* activations,
                             size_t activation_stride, int64_t n_tokens, float* out, size_t out_stride);

  /* ABI 1.1. Optional (NULL: a CUDA backend multiplies expert by expert). See strata_cuda_expert_matvec;
   * meant for the decode path (a few slots): each slot reads its expert's rows once. */
  strata_status (*cuda_expert_matvec)(const strata_cuda_expert_matvec* args, void* stream, strata_error* error);
  /* ABI 1.1. Optional (NULL: a CUDA backend decodes weights to f16 and multiplies with its own GEMM). See
   * strata_cuda_grouped_gemm; the prompt path: weights are decoded once per tile of up to 64 tokens. */
  strata_status (*cuda_grouped_gemm)(const strata_cuda_grouped_gemm* args, void* stream, strata_error* error);
  /* ABI 1.2. Optional (NULL: the backend passes float activations to cuda_matvec). cuda_matvec with the
   * activations already rounded to 8 bits, as the decode kernels round them: row t is levels[t * n ..],
   * n int8 values, with one float scale per 32 values at scales[t * n / 32 ..] (value = scale * level,
   * scale = max |x| / 127 over the 32). The kernel producing the activations rounds them once, instead of
   * every block of every matvec reading them. STRATA_E_UNSUPPORTED declines a call (say, rows longer than
   * the kernel holds); the backend then passes the floats to cuda_matvec. */
  strata_status (*cuda_matvec_q8)(const void* weight, int64_t n, int64_t n_rows, size_t row_bytes, const int8_t* levels,
                                  const float* scales, int64_t n_tokens, float* out, void* stream, strata_error* error);
  /* ABI 1.5. Optional (NULL: the backend normalizes into a buffer first and calls cuda_matvec_q8). The decode
   * matvec on activations given as the norm of strata_cuda_normed_rows: every block of the kernel computes
   * the norm of the few rows itself while the kernel before it is the only one between the residual
   * stream's producer and it. STRATA_E_UNSUPPORTED declines a call (rows longer than the kernel holds). */
  strata_status (*cuda_matvec_normed)(const void* weight, int64_t n, int64_t n_rows, size_t row_bytes,
                                      const strata_cuda_normed_rows* x, int64_t n_tokens, float* out, void* stream,
                                      strata_error* error);

  /* ABI 1.6. Optional (NULL: none). The same values in a layout this plugin's CUDA kernels read with fewer
   * instructions than the file's blocks, usually at more bytes: a backend may store a weight's rows that way
   * on the device (its choice, e.g. an option, where VRAM allows). cuda_repack converts n_blocks blocks of
   * this type into as many blocks of cuda_repacked (block_elements equal, block_bytes its own), exactly: its
   * dequantize gives the same floats. cuda_repacked is a type of its own (its type_id this type's with
   * STRATA_REPACKED_TYPE_BIT set, not a GGUF type, in no plugin's table) whose cuda_* kernels take those
   * blocks. Host threads call cuda_repack, several at once on parts of one weight: it must be thread-safe. */
  const struct strata_quant_type* cuda_repacked;
  strata_status (*cuda_repack)(const void* blocks, void* out, int64_t n_blocks, strata_error* error);

  /* ABI 1.8. Optional (NULL: the CPU backend multiplies through cpu_dot_rows_multi). Weight rows as signed
   * 8-bit levels, an integer scale per STRATA_CPU_INT8_GROUP values and a float scale per STRATA_CPU_INT8_BLOCK
   * values, for a CPU backend's int8 matrix kernels (AVX-512 VNNI, AMX), which decode a tile of rows once for
   * all of a prompt's tokens and then multiply bytes: for r < n_rows and k < n (whole blocks), value k of row r
   * is exactly the dequantizer's float block_scales[r * (n / STRATA_CPU_INT8_BLOCK) + k / STRATA_CPU_INT8_BLOCK]
   * * (group_scales[r * (n / STRATA_CPU_INT8_GROUP) + k / STRATA_CPU_INT8_GROUP] * levels[r * n + k]); rows start
   * row_bytes apart in weight. Any level -128..127, any group scale -32768..32767. Only for types whose values
   * are such products (block_elements a multiple of the block; offsets per group: cpu_rows_int8_offsets) and whose Q8_K
   * dot kernels (cpu_dot_rows at the avx512 level) sum per token, block by block in order, sum = fma(block_scale *
   * activation_scale, (float) integer, sum) with the integer the block's exact sum of group_scale * level * q8: the
   * backend's int8 kernels then give each product the same float as the dot kernels, so a logit does not depend on how
   * many tokens a step has. Thread-safe as cpu_dot_rows. */
  void (*cpu_rows_to_int8)(int64_t n, int64_t n_rows, const void* weight, size_t row_bytes, int8_t* levels,
                           int16_t* group_scales, float* block_scales);

  /* ABI 1.9. Optional (NULL: none). As cuda_repacked and cuda_repack, for a CPU backend: the same values in a
   * layout whose CPU kernels (cpu_dot_rows, and cpu_rows_to_int8 where this type has it) decode faster, usually
   * at more bytes; a CPU backend may keep a weight's rows that way in its own memory instead of reading the
   * host's mapped bytes (its choice: an option, since the copy costs memory the mapping did not). cpu_repack
   * has cuda_repack's contract; cpu_repacked's dot kernels give the same floats as this type's. */
  const struct strata_quant_type* cpu_repacked;
  strata_status (*cpu_repack)(const void* blocks, void* out, int64_t n_blocks, strata_error* error);

  /* ABI 1.10. Optional (NULL: the values have no offsets). For a type with cpu_rows_to_int8 whose values also
   * carry an offset per STRATA_CPU_INT8_GROUP values (Q4_K's and Q5_K's mins): value k of row r is, in real
   * arithmetic (the dequantizer may round once more), cpu_rows_to_int8's product plus
   * block_offset_scales[r * (n / STRATA_CPU_INT8_BLOCK) + k / STRATA_CPU_INT8_BLOCK]
   * * group_offsets[r * (n / STRATA_CPU_INT8_GROUP) + k / STRATA_CPU_INT8_GROUP]. The Q8_K dot kernels at the
   * avx512 level then add, after each block's term of cpu_rows_to_int8's contract, sum = fma(block_offset_scale *
   * activation_scale, (float) offsets, sum) with offsets the block's exact sum of group_offset * (the sum of the
   * group's q8): the int8 kernels give the same floats again. Thread-safe as cpu_dot_rows. */
  void (*cpu_rows_int8_offsets)(int64_t n, int64_t n_rows, const void* weight, size_t row_bytes, int16_t* group_offsets,
                                float* block_offset_scales);
} strata_quant_type;

/* ABI 1.8: the values that share one integer scale, and one float scale, in strata_quant_type::cpu_rows_to_int8's
 * output (the Q8_K activation block is the float scale's block). */
#define STRATA_CPU_INT8_GROUP 32
#define STRATA_CPU_INT8_BLOCK 256

/* ABI 1.6: set in the type_id of a repacked layout (strata_quant_type::cuda_repacked). */
#define STRATA_REPACKED_TYPE_BIT 0x80000000u

typedef struct strata_quant_table {
  uint32_t struct_size;
  uint32_t type_count;
  /* Pointers, not an array of structs, so that each type's struct_size can grow independently. */
  const strata_quant_type* const* types;
} strata_quant_table;

#ifdef __cplusplus
}
#endif

#endif /* STRATA_QUANT_H */
