/* dist: the plugin registry and configuration, for tools and test kits.
 *
 * distinfo, the conformance kit and distbench use these to see every plugin
 * (including the ones that failed to load, with the reason), the effective
 * configuration with the source of each value, and to drive a plugin's ABI
 * directly. Everything returned here is owned by the core and lives until the
 * process exits, unless said otherwise. Link with -ldist. */
#ifndef DIST_REGISTRY_H_
#define DIST_REGISTRY_H_

#include "dist/backend_plugin.h"
#include "dist/dist.h"
#include "dist/error.h"
#include "dist/host.h"
#include "dist/rendezvous_plugin.h"
#include "dist/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dist_plugin_kind {
  DIST_PLUGIN_BACKEND = 0,
  DIST_PLUGIN_RENDEZVOUS = 1
} dist_plugin_kind_t;

typedef enum dist_plugin_status {
  DIST_PLUGIN_OK = 0,          /* loaded, initialized, probe passed */
  DIST_PLUGIN_UNAVAILABLE = 1, /* loaded, but its probe says it cannot run
                                  here (reason says why) */
  DIST_PLUGIN_LOAD_FAILED = 2, /* dlopen failed (reason: dlerror text) */
  DIST_PLUGIN_BAD_ABI = 3,     /* no entry symbol, major mismatch, bad table */
  DIST_PLUGIN_INIT_FAILED = 4, /* initialize() returned an error */
  DIST_PLUGIN_SHADOWED = 5     /* same name found earlier in the search path */
} dist_plugin_status_t;

typedef struct dist_plugin_info {
  size_t struct_size;
  dist_plugin_kind_t kind;
  const char* name; /* from the table, else from the file name */
  const char* path; /* absolute path of the .so */
  dist_plugin_status_t status;
  const char* reason; /* NULL when status is DIST_PLUGIN_OK */
  uint32_t abi_major; /* 0 when the table could not be read */
  uint32_t abi_minor;
  const char* version;                      /* plugin version, or NULL */
  const char* library_version;              /* e.g. "Gloo 0.5.0", or NULL */
  dist_backend_capabilities_t capabilities; /* backends only */
  const char* const* schemes;               /* rendezvous only, NULL-terminated */
} dist_plugin_info_t;

/* Scans the search path (once; later calls return the same list) and
 * returns every plugin file found, in search order. */
DIST_EXPORT dist_error_t* dist_list_plugins(const dist_plugin_info_t** infos, size_t* count);

/* The plugin directories searched, in order: the one beside libdist.so
 * (<libdir>/dist/plugins), then DIST_PLUGIN_PATH's. NULL-terminated. */
DIST_EXPORT const char* const* dist_plugin_search_path(void);

/* Loads (or returns the already loaded) backend plugin by name ("gloo") or
 * by path to a .so, runs its initialize, and returns its table. Hard errors
 * carry the dlerror() text, the path and both ABI versions; an unknown name
 * lists the available backends and the directories searched. */
DIST_EXPORT dist_error_t* dist_load_backend(const char* name_or_path,
                                            const dist_backend_plugin_t** plugin);

/* The same for the rendezvous plugin that handles `scheme` ("tcp"). */
DIST_EXPORT dist_error_t* dist_load_rendezvous(const char* scheme,
                                               const dist_rendezvous_plugin_t** plugin);

/* The services the core hands to plugins (for kits that drive a plugin). */
DIST_EXPORT const dist_host_api_t* dist_host_api(void);

/* Runs the rendezvous for `url` and the core's join check (world sizes
 * agree, ranks unique, all arrive within the timeout). On success the caller
 * owns result->store. */
DIST_EXPORT dist_error_t* dist_rendezvous(const char* url, const dist_rendezvous_hints_t* hints,
                                          int64_t timeout_ms, dist_rendezvous_result_t* result);

/* One effective configuration value and where it came from. */
typedef struct dist_config_entry {
  size_t struct_size;
  const char* key; /* "backend", "init_method", "timeout_ms", ... */
  const char* value;
  const char* source; /* "argument", "environment (DIST_BACKEND)",
                         "config file (/etc/dist.toml)", "default" */
} dist_config_entry_t;

/* Resolves the configuration dist_init would use for `options` (may be
 * NULL), without initializing anything. *entries is owned by the caller and
 * released with dist_config_entries_free. Errors name the bad variable or
 * file line and the fix. */
DIST_EXPORT dist_error_t* dist_resolve_config(const dist_init_options_t* options,
                                              dist_config_entry_t** entries, size_t* count);
DIST_EXPORT void dist_config_entries_free(dist_config_entry_t* entries, size_t count);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DIST_REGISTRY_H_ */
