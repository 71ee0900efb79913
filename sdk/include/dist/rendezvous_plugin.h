/* dist SDK: the rendezvous plugin ABI, version 1.
 *
 * A rendezvous plugin is a shared object named libdist-rendezvous-<name>.so
 * exporting exactly one symbol:
 *
 *     DIST_EXPORT const dist_rendezvous_plugin_t* dist_rendezvous_plugin_v1(void);
 *
 * It turns an init-method URL ("tcp://host:port?rank=0&world_size=4") into
 * this process's rank, the world size and a store shared by all ranks. The
 * core then runs the join check over that store (world sizes agree, ranks
 * unique, everyone arrived in time), so plugins need not.
 *
 * ABI 1.2: when the hints carry the option "dist.join" = "1", the process
 * joins a running job (dist.h: DIST_JOIN): open the job's store as a plain
 * client and claim no rank (host no store, write no join record; rank and
 * world size in the result are ignored). A plugin that cannot (mpi://)
 * returns DIST_FAILED_PRECONDITION saying why. The core asks this only of
 * plugins of 1.2 and later. */
#ifndef DIST_RENDEZVOUS_PLUGIN_H_
#define DIST_RENDEZVOUS_PLUGIN_H_

#include "dist/error.h"
#include "dist/host.h"
#include "dist/store.h"
#include "dist/types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DIST_RENDEZVOUS_ABI_MAJOR 1
#define DIST_RENDEZVOUS_ABI_MINOR 2
#define DIST_RENDEZVOUS_ENTRY_SYMBOL "dist_rendezvous_plugin_v1"

/* What the caller already knows. Borrowed for the call. */
typedef struct dist_rendezvous_hints {
  size_t struct_size;
  int32_t rank;             /* -1: unknown, take it from the URL or environment */
  int32_t world_size;       /* -1: unknown */
  const dist_kv_t* options; /* extra settings ("store_token", ...) */
  size_t num_options;
} dist_rendezvous_hints_t;

typedef struct dist_rendezvous_result {
  size_t struct_size; /* set by the CALLER */
  int32_t rank;
  int32_t world_size;
  int32_t local_rank;       /* -1 if unknown */
  int32_t local_world_size; /* -1 if unknown */
  dist_store_t* store;      /* OWNED by the caller: release it when done
                               (release_failed after a failed join) */
} dist_rendezvous_result_t;

typedef struct dist_rendezvous_plugin {
  size_t struct_size;
  uint32_t abi_major;
  uint32_t abi_minor;
  const char* name;    /* static, e.g. "tcp" */
  const char* version; /* static */

  /* NULL-terminated static list of URL schemes handled, e.g. {"tcp", NULL}. */
  const char* const* schemes;

  dist_error_t* (*initialize)(const dist_host_api_t* host);

  /* Resolves `url` within timeout_ms (> 0). Errors name the URL, the
   * variable or the address at fault and what to do. */
  dist_error_t* (*resolve)(const char* url, const dist_rendezvous_hints_t* hints,
                           int64_t timeout_ms, dist_rendezvous_result_t* result);
} dist_rendezvous_plugin_t;

typedef const dist_rendezvous_plugin_t* (*dist_rendezvous_plugin_entry_fn)(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DIST_RENDEZVOUS_PLUGIN_H_ */
