/* Compiles every public header as C11 and checks a few inline helpers. */
#include <stdio.h>
#include <string.h>

#include "dist/backend_plugin.h"
#include "dist/dist.h"
#include "dist/error.h"
#include "dist/host.h"
#include "dist/registry.h"
#include "dist/rendezvous_plugin.h"
#include "dist/store.h"
#include "dist/types.h"

int main(void) {
  int failures = 0;
  if (dist_dtype_size(DIST_BFLOAT16) != 2 || dist_dtype_size(DIST_FLOAT64) != 8) {
    fprintf(stderr, "dtype sizes wrong\n");
    ++failures;
  }
  dist_error_t* error = dist_error_new(DIST_INVALID_ARGUMENT, "bad %s\nvalue %d", "rank", 7);
  if (dist_error_code(error) != DIST_INVALID_ARGUMENT ||
      strcmp(dist_error_message(error), "bad rank value 7") != 0) {
    fprintf(stderr, "error: %s\n", dist_error_message(error));
    ++failures;
  }
  dist_error_destroy(error);
  dist_error_destroy(NULL);
  dist_init_options_t options = dist_init_options_default();
  if (options.struct_size != sizeof(options) || options.rank != -1) ++failures;
  printf("%d passed, %d failed\n", failures == 0 ? 1 : 0, failures == 0 ? 0 : 1);
  return failures == 0 ? 0 : 1;
}
