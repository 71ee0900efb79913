/* dist SDK: errors as objects.
 *
 * Every fallible function returns `dist_error_t*`: NULL means success;
 * anything else is an error that the CALLER owns and must release with
 * dist_error_destroy(). An error carries its own destroy function, so it can
 * be created in one shared object and destroyed in another (the core never
 * unloads a plugin, so that function stays valid). No C++ exception ever
 * crosses this ABI. */
#ifndef DIST_ERROR_H_
#define DIST_ERROR_H_

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Error codes. The numbers equal absl::StatusCode's, so C++ code converts
 * without a table. */
typedef enum dist_error_code {
  DIST_OK = 0,
  DIST_CANCELLED = 1,
  DIST_UNKNOWN = 2,
  DIST_INVALID_ARGUMENT = 3,
  DIST_DEADLINE_EXCEEDED = 4, /* a timeout */
  DIST_NOT_FOUND = 5,
  DIST_ALREADY_EXISTS = 6,
  DIST_PERMISSION_DENIED = 7,
  DIST_RESOURCE_EXHAUSTED = 8,
  DIST_FAILED_PRECONDITION = 9, /* e.g. ABI mismatch, wrong launch */
  DIST_ABORTED = 10,            /* communicator aborted after a failure */
  DIST_OUT_OF_RANGE = 11,
  DIST_UNIMPLEMENTED = 12, /* op, dtype or device not supported */
  DIST_INTERNAL = 13,
  DIST_UNAVAILABLE = 14, /* peer died, connection lost, no device */
  DIST_DATA_LOSS = 15,
  DIST_UNAUTHENTICATED = 16,
  /* ---- Appended in 1.3 ---- */
  DIST_REVOKED = 17 /* the group was revoked (dist_revoke, or a rank failed):
                       call dist_shrink to go on without the failed ranks */
} dist_error_code_t;

typedef struct dist_error dist_error_t;

struct dist_error {
  size_t struct_size;                  /* sizeof(dist_error_t) of the creator */
  dist_error_code_t code;              /* never DIST_OK */
  const char* message;                 /* owned by the error; valid until destroy; one
                                          line, no trailing newline */
  void (*destroy)(dist_error_t* self); /* frees the error and its message */
};

/* Releases an error. NULL is a no-op. */
static inline void dist_error_destroy(dist_error_t* error) {
  if (error != NULL) error->destroy(error);
}

static inline dist_error_code_t dist_error_code(const dist_error_t* error) {
  return error == NULL ? DIST_OK : error->code;
}

/* The message of an error; "" for NULL (success). */
static inline const char* dist_error_message(const dist_error_t* error) {
  return error == NULL ? "" : error->message;
}

static inline const char* dist_error_code_name(dist_error_code_t code) {
  switch (code) {
    case DIST_OK:
      return "OK";
    case DIST_CANCELLED:
      return "CANCELLED";
    case DIST_UNKNOWN:
      return "UNKNOWN";
    case DIST_INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case DIST_DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case DIST_NOT_FOUND:
      return "NOT_FOUND";
    case DIST_ALREADY_EXISTS:
      return "ALREADY_EXISTS";
    case DIST_PERMISSION_DENIED:
      return "PERMISSION_DENIED";
    case DIST_RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case DIST_FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case DIST_ABORTED:
      return "ABORTED";
    case DIST_OUT_OF_RANGE:
      return "OUT_OF_RANGE";
    case DIST_UNIMPLEMENTED:
      return "UNIMPLEMENTED";
    case DIST_INTERNAL:
      return "INTERNAL";
    case DIST_UNAVAILABLE:
      return "UNAVAILABLE";
    case DIST_DATA_LOSS:
      return "DATA_LOSS";
    case DIST_UNAUTHENTICATED:
      return "UNAUTHENTICATED";
    case DIST_REVOKED:
      return "REVOKED";
    default:
      return "UNKNOWN";
  }
}

/* ---- Creating errors (for plugins and the core) ------------------------ */

static inline void dist_error_free_single_block_(dist_error_t* self) { free(self); }

static inline void dist_error_keep_static_(dist_error_t* self) { (void)self; }

/* Creates an error with a printf-style message in one allocation. Returns a
 * static out-of-memory error if allocation fails, never NULL. */
static inline dist_error_t* dist_error_vnew(dist_error_code_t code, const char* format,
                                            va_list args) {
  static dist_error_t out_of_memory = {sizeof(dist_error_t), DIST_RESOURCE_EXHAUSTED,
                                       "out of memory creating an error", dist_error_keep_static_};
  va_list copy;
  va_copy(copy, args);
  int length = vsnprintf(NULL, 0, format, copy);
  va_end(copy);
  if (length < 0) length = 0;
  dist_error_t* error = (dist_error_t*)malloc(sizeof(dist_error_t) + (size_t)length + 1);
  if (error == NULL) return &out_of_memory; /* its destroy frees nothing */
  char* text = (char*)(error + 1);
  vsnprintf(text, (size_t)length + 1, format, args);
  /* Errors are one line: newlines in formatted parts become spaces. */
  for (char* p = text; *p; ++p) {
    if (*p == '\n' || *p == '\r') *p = ' ';
  }
  error->struct_size = sizeof(dist_error_t);
  error->code = code == DIST_OK ? DIST_UNKNOWN : code;
  error->message = text;
  error->destroy = dist_error_free_single_block_;
  return error;
}

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static inline dist_error_t*
dist_error_new(dist_error_code_t code, const char* format, ...) {
  va_list args;
  va_start(args, format);
  dist_error_t* error = dist_error_vnew(code, format, args);
  va_end(args);
  return error;
}

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DIST_ERROR_H_ */
