/* dist SDK: services the core offers to plugins.
 *
 * The core passes one `dist_host_api_t` to each plugin's `initialize`. It is
 * owned by the core and valid until the process exits. Check struct_size
 * before using a field appended after 1.0. */
#ifndef DIST_HOST_H_
#define DIST_HOST_H_

#include "dist/error.h"
#include "dist/store.h"
#include "dist/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dist_host_api {
  size_t struct_size;
  uint32_t abi_major;
  uint32_t abi_minor;
  const char* core_version; /* static, e.g. "1.0.0" */

  /* Writes one log line through the core, so every line of the process looks
   * the same ("[dist r3 gloo] warn: ..."). `component` is the plugin name.
   * Lines above the configured level are dropped; check `log_enabled` first
   * to skip formatting (a NULL `log_enabled` means no pre-check: format and
   * call `log`, which still filters). Thread-safe. */
  void (*log)(dist_log_level_t level, const char* component, const char* message);
  int (*log_enabled)(dist_log_level_t level);

  /* Returns a new store that prepends `prefix` to every key of `base`. The
   * caller owns the result (release it); `base` must outlive it. */
  dist_error_t* (*store_with_prefix)(const dist_store_t* base, const char* prefix,
                                     dist_store_t** out);
} dist_host_api_t;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DIST_HOST_H_ */
