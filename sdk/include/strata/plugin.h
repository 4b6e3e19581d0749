/* Strata plugin ABI, version 1.
 *
 * Only C types cross this boundary. A plugin exports one symbol, strata_plugin_query, which returns a
 * descriptor. The first three fields of the descriptor (struct_size, abi_major, abi_minor) are frozen
 * for every ABI version, so a host can always read them and refuse a plugin it cannot speak to.
 *
 * Compatibility: a host accepts a plugin whose abi_major equals its own and whose abi_minor is not newer
 * than its own. Tables only grow by appending fields; struct_size tells which fields a plugin has, so a
 * newer host reads an older plugin's shorter table and treats the missing tail as absent (NULL / 0).
 */
#ifndef STRATA_PLUGIN_H
#define STRATA_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define STRATA_ABI_MAJOR 1
#define STRATA_ABI_MINOR 10

#define STRATA_PLUGIN_QUERY_SYMBOL "strata_plugin_query"

#if defined(_WIN32)
#define STRATA_PLUGIN_EXPORT __declspec(dllexport)
#else
#define STRATA_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

/* The bytes a struct of this type needs to hold field: where field ends. A constant expression. */
#define STRATA_FIELD_END(type, field) (offsetof(type, field) + sizeof(((type*)0)->field))

/* Whether the struct that ptr points to, which starts with struct_size and may come from the other side of the
 * boundary built for an older minor, has field: its struct_size covers the field's bytes. A field it has may
 * still be NULL or 0 where the field is optional. ptr must not be NULL and is evaluated more than once. */
#define STRATA_HAS_FIELD(ptr, field) \
  ((size_t)((const char*)&(ptr)->field - (const char*)(ptr)) + sizeof((ptr)->field) <= (size_t)(ptr)->struct_size)

/* Status codes. Every call that can fail returns one and, on failure, writes a message into the
 * caller's strata_error buffer. */
typedef int32_t strata_status;
enum {
  STRATA_OK = 0,
  STRATA_E_INVALID_ARGUMENT = 1, /* the caller passed something the callee cannot accept */
  STRATA_E_UNSUPPORTED = 2,      /* cannot run here (missing CPU feature, no GPU) or not implemented */
  STRATA_E_OUT_OF_MEMORY = 3,
  STRATA_E_IO = 4,
  STRATA_E_INTERNAL = 5 /* a bug in the plugin */
};

/* A message buffer owned by the caller. The callee writes a NUL-terminated message of at most
 * capacity-1 bytes. */
typedef struct strata_error {
  char* message;
  size_t capacity;
} strata_error;

/* What a plugin provides; selects the type of descriptor->table. */
enum {
  STRATA_PLUGIN_KIND_QUANT = 1,   /* table: const strata_quant_table* (strata/quant.h) */
  STRATA_PLUGIN_KIND_BACKEND = 2, /* reserved for the backend table */
  STRATA_PLUGIN_KIND_CVEC = 3,    /* reserved */
  STRATA_PLUGIN_KIND_VISION = 4   /* reserved */
};

enum { STRATA_LOG_DEBUG = 0, STRATA_LOG_INFO = 1, STRATA_LOG_WARN = 2, STRATA_LOG_ERROR = 3 };

/* Services the host offers a plugin; valid from init until shutdown. */
typedef struct strata_host_services {
  uint32_t struct_size;
  void* context;
  /* Writes one line into the host's log. */
  void (*log)(void* context, int32_t level, const char* message);
  /* ABI 1.7 (read where struct_size covers it): the CPU instruction set the user asked every CPU kernel to
   * use ("auto", "avx512", "avx2" or "scalar"; the strata executable's --cpu-isa), or "" when none was asked:
   * a plugin then follows STRATA_CPU_ISA, else its own options. strata/plugin.hpp's adopt_host_settings
   * applies it to the SDK's kernels (strata/cpu_isa.hpp). */
  const char* cpu_isa;
} strata_host_services;

typedef struct strata_plugin_descriptor {
  /* Frozen for every ABI version: */
  uint32_t struct_size;
  uint16_t abi_major;
  uint16_t abi_minor;
  /* ABI 1.0: */
  uint32_t kind;       /* STRATA_PLUGIN_KIND_* */
  const char* name;    /* unique among the loaded plugins, e.g. "quant-iq3" */
  const char* version; /* the plugin's own version, free text */
  const void* table;   /* the kind's function table */
  /* Can this plugin run on this machine? On success sets *score (> 0): how well it runs here (a GPU
   * backend with a device scores above the CPU backend); among backends the manifest does not rank, the
   * highest score is the default. A plugin that cannot run here returns STRATA_E_UNSUPPORTED with the
   * reason; the host then skips it. May be NULL: always runs, score 1. */
  strata_status (*probe)(int32_t* score, strata_error* error);
  /* Called once after a successful probe. options_json is the manifest's "options" object for this
   * plugin as JSON text ("{}" when none). May be NULL. */
  strata_status (*init)(const strata_host_services* host, const char* options_json, strata_error* error);
  /* Called once before the library is unloaded. May be NULL. */
  void (*shutdown)(void);
} strata_plugin_descriptor;

typedef const strata_plugin_descriptor* (*strata_plugin_query_fn)(void);

#ifdef __cplusplus
}
#endif

#endif /* STRATA_PLUGIN_H */
