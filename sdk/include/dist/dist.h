/* dist: the host API. Link with -ldist (pkg-config --libs dist).
 *
 *   dist_process_group_t* pg = NULL;
 *   dist_error_t* err = dist_init(NULL, &pg);   // env://, DIST_BACKEND
 *   if (err) { fprintf(stderr, "%s\n", dist_error_message(err)); ... }
 *   float x[4] = {...};
 *   dist_buffer_t b = dist_make_buffer(x, 4, DIST_FLOAT32, dist_cpu());
 *   err = dist_all_reduce(pg, &b, &b, DIST_SUM, NULL);  // blocking
 *   dist_destroy(pg);
 *
 * Every operation takes an optional `work` out-parameter: NULL makes the
 * call blocking (bounded by the group's timeout); non-NULL makes it
 * asynchronous and hands back a work handle the caller owns. Operations on a
 * group complete in the order they were issued. Buffer shapes per operation
 * are those of dist/backend_plugin.h. All functions are thread-safe. */
#ifndef DIST_DIST_H_
#define DIST_DIST_H_

#include <string.h>

#include "dist/error.h"
#include "dist/store.h"
#include "dist/types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DIST_VERSION_MAJOR 1
#define DIST_VERSION_MINOR 5
#define DIST_VERSION_PATCH 0

typedef struct dist_process_group dist_process_group_t;
typedef struct dist_work dist_work_t;

/* Options for dist_init. Every field may be left 0/NULL to fall back, in
 * order, to the environment (DIST_*), the config file, and the default.
 * Borrowed for the call. */
typedef struct dist_init_options {
  size_t struct_size;       /* sizeof(dist_init_options_t) */
  const char* backend;      /* "gloo", "mpi", "nccl", a path to a .so, or a
                               device map "cpu:gloo,cuda:nccl" */
  const char* init_method;  /* "env://", "tcp://h:p?...", "file:///path?..." */
  int32_t rank;             /* used only when world_size > 0; otherwise */
  int32_t world_size;       /* both come from the init method/launcher */
  int64_t timeout_ms;       /* 0: DIST_TIMEOUT, config, or 300000 */
  const char* config_file;  /* TOML; NULL: DIST_CONFIG */
  const dist_kv_t* options; /* backend/rendezvous options, highest
                               precedence */
  size_t num_options;
  const char* group_name; /* for logs; NULL: "default" */
  /* ---- Appended in 1.4 ---- */
  /* A store the host already has (torch's c10d::Store, a launcher's own),
   * through which the ranks meet instead of an init method; rank and
   * world_size must then be given, and init_method is ignored. OWNED by the
   * core from the call on, whether dist_init succeeds or fails: it calls
   * store->release once, when the group and every subgroup are done with
   * it. Every rank must pass a store that reaches the same keys (give each
   * job its own prefix). NULL: the init method's rendezvous. */
  dist_store_t* store;
} dist_init_options_t;

/* Returns options with struct_size set and everything else "unset". */
static inline dist_init_options_t dist_init_options_default(void) {
  dist_init_options_t o;
  memset(&o, 0, sizeof(o));
  o.struct_size = sizeof(o);
  o.rank = -1;
  return o;
}

/* Creates the process group: loads the backend(s), runs the rendezvous and
 * the join check, creates the communicators. Collective over all ranks.
 * `options` may be NULL. On success the caller owns *group (dist_destroy). */
DIST_EXPORT dist_error_t* dist_init(const dist_init_options_t* options,
                                    dist_process_group_t** group);

/* Waits for outstanding work (bounded by the timeout) and frees the group.
 * Subgroups must be destroyed first. NULL is a no-op.
 *
 * fork(): groups and work handles belong to the process that made them. In
 * a child that fork() made afterwards, every operation on them (and
 * dist_work_wait/test, dist_new_group, dist_trace_dump) fails with
 * DIST_FAILED_PRECONDITION, and dist_destroy, dist_abort and
 * dist_work_destroy leave the parent's job alone (the child's copy is not
 * freed). The child may dist_init a group of its own. */
DIST_EXPORT void dist_destroy(dist_process_group_t* group);

/* This process's rank in the group, or -1 if it is not a member. */
DIST_EXPORT int32_t dist_rank(const dist_process_group_t* group);
DIST_EXPORT int32_t dist_world_size(const dist_process_group_t* group);

/* Name of the backend serving `device_type` in this group ("gloo"), or NULL
 * if none does. Static string. */
DIST_EXPORT const char* dist_backend_name(const dist_process_group_t* group,
                                          dist_device_type_t device_type);

/* The group's default timeout in milliseconds. */
DIST_EXPORT int64_t dist_timeout_ms(const dist_process_group_t* group);

/* ---- Collectives ----------------------------------------------------- */

DIST_EXPORT dist_error_t* dist_all_reduce(dist_process_group_t* group, const dist_buffer_t* send,
                                          const dist_buffer_t* recv, dist_reduce_op_t op,
                                          dist_work_t** work);
DIST_EXPORT dist_error_t* dist_broadcast(dist_process_group_t* group, const dist_buffer_t* send,
                                         const dist_buffer_t* recv, int32_t root,
                                         dist_work_t** work);
DIST_EXPORT dist_error_t* dist_reduce(dist_process_group_t* group, const dist_buffer_t* send,
                                      const dist_buffer_t* recv, dist_reduce_op_t op, int32_t root,
                                      dist_work_t** work);
DIST_EXPORT dist_error_t* dist_all_gather(dist_process_group_t* group, const dist_buffer_t* send,
                                          const dist_buffer_t* recv, dist_work_t** work);
DIST_EXPORT dist_error_t* dist_gather(dist_process_group_t* group, const dist_buffer_t* send,
                                      const dist_buffer_t* recv, int32_t root, dist_work_t** work);
DIST_EXPORT dist_error_t* dist_scatter(dist_process_group_t* group, const dist_buffer_t* send,
                                       const dist_buffer_t* recv, int32_t root, dist_work_t** work);
DIST_EXPORT dist_error_t* dist_reduce_scatter(dist_process_group_t* group,
                                              const dist_buffer_t* send, const dist_buffer_t* recv,
                                              dist_reduce_op_t op, dist_work_t** work);
DIST_EXPORT dist_error_t* dist_all_to_all(dist_process_group_t* group, const dist_buffer_t* send,
                                          const dist_buffer_t* recv, dist_work_t** work);
DIST_EXPORT dist_error_t* dist_barrier(dist_process_group_t* group, dist_work_t** work);
/* Point-to-point. A recv matches the first send from `peer` with its tag.
 * A send may complete once its data is buffered, or only once its receiver
 * has it: backends differ, and so do sizes (NCCL always waits for the
 * receiver; shm waits from 256 KiB, where the receiver reads the sender's
 * buffer directly). So the send buffer must stay unchanged and mapped until
 * the send completes, and a rank that sends before it receives must not
 * rely on the send completing first: use dist_sendrecv, or issue both and
 * then wait. */
DIST_EXPORT dist_error_t* dist_send(dist_process_group_t* group, const dist_buffer_t* buffer,
                                    int32_t peer, int64_t tag, dist_work_t** work);
DIST_EXPORT dist_error_t* dist_recv(dist_process_group_t* group, const dist_buffer_t* buffer,
                                    int32_t peer, int64_t tag, dist_work_t** work);

/* Sends `send` to rank `dst` and receives `recv` from rank `src`, both with
 * `tag`, and returns once both are done (MPI_Sendrecv). Blocking, with the
 * group's timeout. It never deadlocks where a blocking send followed by a
 * blocking recv would (every rank of a ring sending first): it is a send and
 * a recv issued together, then waited for, in one call, which a backend may
 * run with no work handles (shm, 8 B on 2 ranks: 0.9 us, against 1.3-1.5 us
 * for the four calls).
 * `dst` and `src` may be the same rank; neither may be this rank. The first
 * error wins (the send's when both fail). Host ABI 1.2. */
DIST_EXPORT dist_error_t* dist_sendrecv(dist_process_group_t* group, const dist_buffer_t* send,
                                        int32_t dst, const dist_buffer_t* recv, int32_t src,
                                        int64_t tag);

/* ---- Work handles ---------------------------------------------------- */

/* Waits up to timeout_ms (< 0: the group's timeout). Returns the
 * operation's error, DIST_DEADLINE_EXCEEDED if still running, or NULL. */
DIST_EXPORT dist_error_t* dist_work_wait(dist_work_t* work, int64_t timeout_ms);
/* *done = 1 once complete; returns the operation's error when done. */
DIST_EXPORT dist_error_t* dist_work_test(dist_work_t* work, int* done);
/* Makes a CUDA stream wait for the work without blocking the host, where
 * the backend supports it (DIST_UNIMPLEMENTED otherwise). */
DIST_EXPORT dist_error_t* dist_work_wait_stream(dist_work_t* work, void* stream);
/* Frees the handle; the operation itself still completes. NULL: no-op. */
DIST_EXPORT void dist_work_destroy(dist_work_t* work);

/* ---- Process management ---------------------------------------------- */

/* Creates a subgroup of `ranks` (ranks of `parent`, any order, unique).
 * Collective: every rank of the parent calls it, in the same order. Every
 * caller gets a group; on non-members dist_rank() is -1 and each operation
 * fails with DIST_FAILED_PRECONDITION naming the members. */
DIST_EXPORT dist_error_t* dist_new_group(dist_process_group_t* parent, const int32_t* ranks,
                                         size_t num_ranks, dist_process_group_t** group);

/* Aborts the group's communicators: pending and later operations fail with
 * DIST_ABORTED carrying `reason`. */
DIST_EXPORT void dist_abort(dist_process_group_t* group, const char* reason);

/* "1.0.0": the core's version. */
DIST_EXPORT const char* dist_version(void);

/* ---- Appended in 1.1 ------------------------------------------------- */

/* Writes this rank's flight recorder (the last DIST_TRACE_ENTRIES
 * operations of every group of this rank, not only `group`) as JSON to
 * `path`; NULL: DIST_TRACE_DIR/rank-<rank>.json, and DIST_FAILED_PRECONDITION
 * when no trace directory is configured. The core also writes it there by
 * itself when an operation fails or times out and when a group aborts.
 * `disttrace DIR` reads the files of every rank. Does not communicate. */
DIST_EXPORT dist_error_t* dist_trace_dump(const dist_process_group_t* group, const char* path);

/* ---- Appended in 1.3: surviving a failed rank --------------------------
 * With survival on (DIST_SURVIVAL=1, or the option dist.survival=1 on every
 * rank), each rank of a group heartbeats through the store and watches the
 * others: a rank silent for DIST_FAILURE_DETECT_MS (default 500) is
 * declared failed and the group is revoked on every rank. The store must
 * outlive the failed rank: file://, or tcp:// / env:// with ?external=1 and
 * a dist_store_server (a rank 0 that hosts the store takes it along when
 * it dies). docs/survival.md has the rules. */

/* Revokes the group on every rank: every pending and later operation fails
 * with DIST_REVOKED naming who revoked it and why, within about a heartbeat
 * (100 ms) of this call where survival is on, at once on this rank
 * otherwise. Thread-safe and idempotent (the first reason stays). */
DIST_EXPORT dist_error_t* dist_revoke(dist_process_group_t* group, const char* reason);

/* The ranks of `group` this process knows to have failed, ascending: up to
 * `capacity` of them into `ranks` (may be NULL when capacity is 0), and
 * their number into *count. Does not communicate. */
DIST_EXPORT dist_error_t* dist_failed_ranks(const dist_process_group_t* group, int32_t* ranks,
                                            size_t capacity, size_t* count);

typedef struct dist_shrink_options {
  size_t struct_size; /* sizeof(dist_shrink_options_t) */
  int64_t timeout_ms; /* bound of the agreement and the new group's set-up;
                         0: the group's timeout */
} dist_shrink_options_t;

/* Called by the surviving ranks of a revoked (or failing) group: they agree
 * on one set of failed ranks, the same on every survivor even when ranks
 * fail during the call, and each gets a new group of the survivors, ranks
 * renumbered in their old order, with the same backends and its own
 * namespace in the store. `options` may be NULL. A rank the survivors
 * declared failed gets DIST_FAILED_PRECONDITION. When a rank fails while
 * the new group is set up, call it again. Needs survival on; the old group
 * stays revoked (destroy it). */
DIST_EXPORT dist_error_t* dist_shrink(dist_process_group_t* group,
                                      const dist_shrink_options_t* options,
                                      dist_process_group_t** new_group);

/* ---- Appended in 1.4 ------------------------------------------------- */

/* The colour of a rank that joins no group in dist_split_group. */
#define DIST_SPLIT_NONE (-1)

/* Splits `parent` by colour in one call (MPI_Comm_split, ncclCommSplit,
 * torch's split_group). Collective: every rank of the parent calls it, in
 * the same order as its other group calls. The ranks that pass the same
 * colour (>= 0) form one new group, numbered by (key, parent rank); each
 * gets that group in *group (the caller owns it: dist_destroy). A rank that
 * passes a negative colour (DIST_SPLIT_NONE) joins none: *group = NULL and
 * no error. A colour is split from the parent's communicators where the
 * backend can (mpi: MPI_Comm_split with the keys, any order; others: a
 * colour in the parent's order), else created anew by its members. */
DIST_EXPORT dist_error_t* dist_split_group(dist_process_group_t* parent, int32_t color, int32_t key,
                                           dist_process_group_t** group);

/* Collectives with a count per rank (elements; displacements in elements
 * from the buffer's start, NULL: packed in rank order), as MPI's v calls and
 * torch's all_to_all_single with split sizes. Every backend has them (a
 * backend's own where it has them, as mpi does; else the core builds them
 * from sendrecv and all_reduce). They take host buffers, and device
 * buffers where the group's backend for that device runs them itself (nccl;
 * DIST_UNIMPLEMENTED otherwise), and are blocking in this version: `work`
 * must be NULL (DIST_UNIMPLEMENTED otherwise). Counts must agree between
 * ranks: what rank i sends rank j is what rank j expects from rank i.
 *   all_to_all_v    send block j (send_counts[j] at send_displs[j]) goes to
 *                   rank j; recv block i (recv_counts[i] at recv_displs[i])
 *                   comes from rank i
 *   all_gather_v    send (recv_counts[rank] elements) -> recv block i of
 *                   every rank
 *   reduce_scatter_v send (sum of recv_counts) reduced over ranks; recv
 *                   gets block `rank` (recv_counts[rank] elements) */
DIST_EXPORT dist_error_t* dist_all_to_all_v(dist_process_group_t* group, const dist_buffer_t* send,
                                            const uint64_t* send_counts,
                                            const uint64_t* send_displs, const dist_buffer_t* recv,
                                            const uint64_t* recv_counts,
                                            const uint64_t* recv_displs, dist_work_t** work);
DIST_EXPORT dist_error_t* dist_all_gather_v(dist_process_group_t* group, const dist_buffer_t* send,
                                            const dist_buffer_t* recv, const uint64_t* recv_counts,
                                            const uint64_t* recv_displs, dist_work_t** work);
DIST_EXPORT dist_error_t* dist_reduce_scatter_v(dist_process_group_t* group,
                                                const dist_buffer_t* send,
                                                const dist_buffer_t* recv,
                                                const uint64_t* recv_counts, dist_reduce_op_t op,
                                                dist_work_t** work);

/* ---- Appended in 1.5: growing a group back -------------------------- */

/* A process joins a running job instead of meeting its first ranks when
 * DIST_JOIN=1 (or the option dist.join=1, or `join = true` in the config
 * file): its dist_init opens the job's store through the init method
 * without claiming a rank, takes a join ticket there and waits, up to its
 * timeout, until the job's ranks admit it with dist_grow. It then returns
 * the grown group, in which the joiner's rank follows the members'. The
 * group name (dist_init_options_t.group_name, "default") names the job's
 * group to join. The store must outlive any rank: tcp:// or env:// with
 * ?external=1 (distrun gives this), file://, or a store from the host.
 * distrun --max-restarts starts restarted ranks this way. */

typedef struct dist_grow_options {
  size_t struct_size; /* sizeof(dist_grow_options_t) */
  int64_t timeout_ms; /* bound of waiting for joiners and of the new group's
                         set-up; 0: the group's timeout */
  int32_t joiners;    /* how many joining processes to admit (>= 1); 0: every
                         one waiting now, waiting for at least one */
} dist_grow_options_t;

/* Called by every rank of `group` (which may be the result of dist_shrink):
 * admits joining processes (DIST_JOIN=1) in the order they took their
 * tickets, and each caller gets the grown group in *new_group, its own rank
 * unchanged and the joiners numbered after the members, with the same
 * backends and its own namespace in the store. Needs survival on. `group`
 * stays usable (destroy it when done). A joiner that gave up before it was
 * admitted is skipped. When a rank fails during the call, every caller gets
 * an error within the timeout: shrink, then grow again. */
DIST_EXPORT dist_error_t* dist_grow(dist_process_group_t* group, const dist_grow_options_t* options,
                                    dist_process_group_t** new_group);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DIST_DIST_H_ */
