/* dist SDK: the key-value store ABI.
 *
 * A store is how ranks meet: rendezvous plugins create one, backends use it
 * to exchange addresses and ids, and the core uses it for the join check and
 * for subgroups (through key prefixes). A store is a table of functions plus
 * an opaque context; every function is thread-safe.
 *
 * Ownership: a `dist_store_t*` handed to you is BORROWED unless the function
 * that gave it says otherwise; its owner releases it with `release` (or,
 * after a failed rendezvous, `release_failed`). Keys are
 * NUL-terminated strings (at most DIST_STORE_MAX_KEY_BYTES), values are byte
 * strings (at most DIST_STORE_MAX_VALUE_BYTES). */
#ifndef DIST_STORE_H_
#define DIST_STORE_H_

#include "dist/error.h"
#include "dist/types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DIST_STORE_MAX_KEY_BYTES 4096
#define DIST_STORE_MAX_VALUE_BYTES (64u * 1024u * 1024u)

typedef struct dist_store dist_store_t;

struct dist_store {
  size_t struct_size; /* sizeof(dist_store_t) of the implementer */
  void* ctx;          /* the implementer's state, passed to every function */

  /* Sets `key` to `value` (overwrites). */
  dist_error_t* (*set)(void* ctx, const char* key, const void* value, size_t size);

  /* Gets `key`, waiting up to timeout_ms (< 0: the store's default) for it to
   * be set. On success *value is a buffer owned by the caller, released with
   * free_value; *value may be NULL when *size == 0. A missing key after the
   * timeout is DIST_DEADLINE_EXCEEDED naming the key. */
  dist_error_t* (*get)(void* ctx, const char* key, int64_t timeout_ms, void** value, size_t* size);

  /* Releases a value returned by get or compare_set. NULL is a no-op. */
  void (*free_value)(void* ctx, void* value);

  /* Atomically adds `delta` to the integer stored at `key` (a missing key
   * counts as 0; values are decimal ASCII) and returns the new value. */
  dist_error_t* (*add)(void* ctx, const char* key, int64_t delta, int64_t* new_value);

  /* Atomically: if `key` holds `expected` (or is missing and expected_size
   * is 0 and expected is NULL), set it to `desired`. Either way *actual
   * receives the value now stored (owned by the caller, free_value). */
  dist_error_t* (*compare_set)(void* ctx, const char* key, const void* expected,
                               size_t expected_size, const void* desired, size_t desired_size,
                               void** actual, size_t* actual_size);

  /* Deletes `key`; *existed (may be NULL) tells whether it was there. */
  dist_error_t* (*remove)(void* ctx, const char* key, int* existed);

  /* *all_exist = 1 when every key exists now, else 0. Does not wait. */
  dist_error_t* (*check)(void* ctx, const char* const* keys, size_t num_keys, int* all_exist);

  /* Waits until every key exists, up to timeout_ms (< 0: default). The
   * timeout error names the keys still missing. */
  dist_error_t* (*wait)(void* ctx, const char* const* keys, size_t num_keys, int64_t timeout_ms);

  /* Number of keys in the store (all prefixes). */
  dist_error_t* (*num_keys)(void* ctx, int64_t* count);

  /* Drops the reference that was handed out with this store. After it the
   * store must not be used by that holder. */
  void (*release)(void* ctx);

  /* Appended in rendezvous ABI 1.1 (DIST_RENDEZVOUS_ABI_MINOR >= 1).
   * Optional: a holder reads it only when struct_size covers it
   * (struct_size >= offsetof(dist_store_t, release_failed) + sizeof(void*))
   * and calls `release` instead when it is not covered or NULL.
   *
   * Like release; also tells the store that its holder's rendezvous failed
   * because of `reason` (one line, NUL-terminated; BORROWED for the call:
   * the store copies what it keeps before returning). A store shared
   * through a file keeps the reason for ranks that open the file later, so
   * they are told at once why the rendezvous failed instead of joining one
   * that is over. A store that keeps nothing may just release. After
   * the call the store must not be used by that holder, exactly as after
   * release; call one of the two, once. */
  void (*release_failed)(void* ctx, const char* reason);
};

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DIST_STORE_H_ */
