/* The smallest backend table a fixture plugin can return: a name, a probe
 * and no communicators. The fixture plugins that break distinfo's loading
 * (crashing, hanging, aborting) need nothing more; each keeps in its own file
 * only what makes it break. */
#ifndef DIST_TESTS_TOOLS_MINIMAL_BACKEND_H_
#define DIST_TESTS_TOOLS_MINIMAL_BACKEND_H_

#include "dist/backend_plugin.h"

/* Fills *table for ABI DIST_BACKEND_ABI_MAJOR.MINOR: `name`, version "0.0.1",
 * `probe` (NULL: none), comm_create failing with DIST_UNIMPLEMENTED "<name>
 * has no communicators", and work_wait/work_destroy that do nothing. Other
 * entries stay as they are (zero in a static table). `name` must outlive
 * the plugin (a string literal). */
void FillMinimalBackend(dist_backend_plugin_t* table, const char* name,
                        dist_error_t* (*probe)(void));

#endif /* DIST_TESTS_TOOLS_MINIMAL_BACKEND_H_ */
