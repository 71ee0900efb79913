/* dist SDK: the backend plugin ABI, version 1.
 *
 * A backend plugin is a shared object named libdist-backend-<name>.so that
 * exports exactly one symbol:
 *
 *     DIST_EXPORT const dist_backend_plugin_t* dist_backend_plugin_v1(void);
 *
 * It returns a table that lives as long as the process (the core never
 * unloads plugins). The core reads the table only as far as its struct_size
 * covers, so a plugin built against an older minor version keeps working,
 * and requires abi_major == DIST_BACKEND_ABI_MAJOR. See sdk/ABI.md.
 *
 * Buffers per operation (W = world size). Counts are exact: every buffer a
 * rank uses holds exactly the elements shown (all_gather: recv.count ==
 * send.count * W; all_reduce: recv.count == send.count; ...); a larger
 * buffer is an error, not a slice. This is the rule the core
 * checks for dist.h callers and the SDK's C++ adapter checks for callers of
 * a plugin's table (dist/cpp/validate.hpp), so every backend follows it.
 *   all_reduce      send[n] -> recv[n] on every rank
 *   broadcast       send[n] on root -> recv[n] on every rank
 *   reduce          send[n] on every rank -> recv[n] on root
 *   all_gather      send[n] -> recv[n*W], rank r's block at r*n
 *   gather          send[n] -> recv[n*W] on root
 *   scatter         send[n*W] on root -> recv[n]
 *   reduce_scatter  send[n*W] -> recv[n], block r of the reduction
 *   all_to_all      send[n*W] -> recv[n*W], block j goes to rank j
 *   barrier         no buffers
 *   send / recv     send[n] to peer / recv[n] from peer, matched by tag
 * Send and recv are disjoint, or in place (NCCL's convention):
 * recv.data == send.data for all_reduce, broadcast and reduce; for
 * all_gather send points at this rank's block inside recv, for
 * reduce_scatter recv at this rank's block inside send. Any other overlap
 * (and any in gather, scatter, all_to_all) is DIST_INVALID_ARGUMENT.
 * Buffers that are unused on a rank (recv of reduce off root) may have
 * data == NULL. Counts and dtypes must agree between ranks. */
#ifndef DIST_BACKEND_PLUGIN_H_
#define DIST_BACKEND_PLUGIN_H_

#include "dist/error.h"
#include "dist/host.h"
#include "dist/store.h"
#include "dist/types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DIST_BACKEND_ABI_MAJOR 1
#define DIST_BACKEND_ABI_MINOR 6
#define DIST_BACKEND_ENTRY_SYMBOL "dist_backend_plugin_v1"

typedef struct dist_backend_comm dist_backend_comm_t; /* plugin-defined */
typedef struct dist_backend_work dist_backend_work_t; /* plugin-defined */

/* What a backend supports. Masks are bit sets: bit (1u << DIST_FLOAT32) in
 * `dtypes`, bit (1u << DIST_SUM) in `all_reduce_ops`, and so on. */
typedef struct dist_backend_capabilities {
  size_t struct_size;      /* set by the CALLER to its sizeof */
  uint32_t device_types;   /* 1u << DIST_DEVICE_CPU | 1u << DIST_DEVICE_CUDA */
  uint32_t dtypes;         /* 1u << dist_dtype_t */
  uint32_t collectives;    /* 1u << dist_collective_t */
  uint32_t all_reduce_ops; /* 1u << dist_reduce_op_t */
  uint32_t reduce_ops;
  uint32_t reduce_scatter_ops;
  /* Bitwise ops (band/bor/bxor) apply to integer dtypes only, whatever the
   * masks say; a floating dtype with them is DIST_INVALID_ARGUMENT. */
  uint32_t flags;    /* DIST_CAP_* below */
  const char* notes; /* static one-line remark (e.g. thread level), or
                        NULL */
} dist_backend_capabilities_t;

#define DIST_CAP_SUBGROUPS (1u << 0)       /* comm_split works */
#define DIST_CAP_STREAM_WAIT (1u << 1)     /* work_wait_stream works */
#define DIST_CAP_THREAD_MULTIPLE (1u << 2) /* ops from many threads at once */
#define DIST_CAP_NEEDS_LAUNCHER                                          \
  (1u << 3)                           /* ranks must come from a launcher \
                                         (e.g. mpirun) */
#define DIST_CAP_CUDA_AWARE (1u << 4) /* takes CUDA pointers directly */
/* Backend ABI 1.5: after a peer died, this process goes on and comm_create
 * makes a working communicator of the survivors (so dist_shrink can use the
 * backend). Without it dist_shrink refuses at once and says why. Plugins
 * older than 1.5 are judged as before: every backend but MPI's. */
#define DIST_CAP_SHRINK (1u << 5)
/* Backend ABI 1.6: comm_split takes `ranks` in any order, member i of the
 * new communicator being ranks[i] (MPI_Comm_split's key), so the core splits
 * a colour whose keys reorder the ranks from the parent too (dist_split_group)
 * instead of creating it anew. */
#define DIST_CAP_SPLIT_ORDERED (1u << 6)

/* Everything a communicator is created from. Borrowed for the duration of
 * comm_create/comm_split, except `store`, which stays valid until
 * comm_destroy returns. */
/* The option the core adds to every communicator's options (a core that
 * predates it leaves it out; one given by the user is replaced): the init
 * method URL the job rendezvoused with,
 * as the core picked it (argument > DIST_INIT_METHOD > config file), e.g.
 * "tcp://10.0.0.1:29500" or "env://". A backend that must find the
 * rendezvous host (to choose the interface that reaches it) reads it here,
 * not from the environment. */
#define DIST_OPTION_INIT_METHOD "dist.init_method"

typedef struct dist_comm_config {
  size_t struct_size;
  int32_t rank; /* 0 <= rank < world_size */
  int32_t world_size;
  int32_t local_rank;       /* rank on this host, -1 if unknown */
  int32_t local_world_size; /* ranks on this host, -1 if unknown */
  dist_store_t* store;      /* namespaced for this communicator */
  int64_t timeout_ms;       /* default for every blocking step, > 0 */
  const dist_kv_t* options; /* backend options ("gloo.ifname" = "lo"), and
                               DIST_OPTION_INIT_METHOD from the core */
  size_t num_options;
  const char* group_name; /* for messages, e.g. "default" or "group1" */
  int32_t device_index;   /* CUDA device to use, -1: choose (LOCAL_RANK) */
} dist_comm_config_t;

/* Arguments of one operation; see the table at the top for the buffers.
 * Borrowed for the duration of the call that takes them (the plugin copies
 * what it keeps); the memory the buffers point to must stay valid until the
 * work completes. */
typedef struct dist_op_args {
  size_t struct_size;
  dist_buffer_t send;
  dist_buffer_t recv;
  dist_reduce_op_t op; /* reducing operations only */
  int32_t root;        /* broadcast, reduce, gather, scatter */
  int32_t peer;        /* send, recv */
  int64_t tag;         /* send, recv */
  int64_t timeout_ms;  /* <= 0: the communicator's timeout */
  /* ---- Appended in ABI 1.2 (read only when struct_size covers it) ---- */
  uint64_t flags; /* DIST_OP_ARGS_* bits; 0 from callers that know none */
} dist_op_args_t;

/* The caller already checked these arguments as dist/cpp/validate.hpp's
 * ValidateOpArgs does, for the communicator's rank and world size (the core
 * sets it on every call it makes, having checked): the SDK's adapter then
 * skips the same checks. Anyone else leaves it 0; a backend may always
 * check again. */
#define DIST_OP_ARGS_CHECKED (1u << 0)

/* Counts and displacements per rank, in elements, of one variable-count
 * collective (run_v, ABI 1.5). Arrays of world_size entries, borrowed for
 * the call. The core has checked every block against its buffer and that
 * the counts it can see agree; displacements are always given (packed ones
 * filled in where the host passed NULL).
 *   all_to_all_v      send_counts/send_displs: block j of send goes to rank
 *                     j; recv_counts/recv_displs: block i of recv comes
 *                     from rank i
 *   all_gather_v      send (recv_counts[rank] elements) -> block i of recv
 *                     on every rank; send_counts/send_displs NULL
 *   reduce_scatter_v  send (sum of recv_counts) reduced over ranks; recv gets
 *                     block `rank`; recv_displs packed, send_* NULL */
typedef struct dist_op_counts {
  size_t struct_size;
  const uint64_t* send_counts;
  const uint64_t* send_displs;
  const uint64_t* recv_counts;
  const uint64_t* recv_displs;
} dist_op_counts_t;

/* Starts one operation. On success *work is a handle the caller owns
 * (work_destroy); the operation runs asynchronously and completes in issue
 * order with the other operations of the communicator. Errors that can be
 * seen at once (bad arguments, an aborted communicator) are returned here. */
typedef dist_error_t* (*dist_backend_op_fn)(dist_backend_comm_t* comm, const dist_op_args_t* args,
                                            dist_backend_work_t** work);

typedef struct dist_backend_plugin {
  size_t struct_size;
  uint32_t abi_major; /* DIST_BACKEND_ABI_MAJOR the plugin was built with */
  uint32_t abi_minor;
  const char* name;    /* static, [a-z0-9_]+, e.g. "gloo" */
  const char* version; /* static, the plugin's own version, e.g. "1.0.0" */

  /* Called once, before anything else. `host` lives forever. */
  dist_error_t* (*initialize)(const dist_host_api_t* host);

  /* Static description of the library under the plugin, e.g.
   * "Open MPI v4.1.4". Valid for the process. */
  const char* (*library_version)(void);

  /* NULL when the backend can run here; otherwise DIST_UNAVAILABLE with the
   * reason, e.g. "no CUDA device: CUDA driver version is insufficient". */
  dist_error_t* (*probe)(void);

  /* Fills *caps; the caller sets caps->struct_size first. */
  void (*get_capabilities)(dist_backend_capabilities_t* caps);

  /* Collective over every rank of the config: makes a communicator. */
  dist_error_t* (*comm_create)(const dist_comm_config_t* config, dist_backend_comm_t** comm);

  /* Makes a subgroup communicator. Called on EVERY rank of `parent` in the
   * same order; `ranks` (parent ranks, unique; ascending unless the backend
   * declares DIST_CAP_SPLIT_ORDERED, then in the new ranks' order) lists
   * the members.
   * On members, config describes the new communicator (its rank, size and a
   * fresh store namespace) and *comm receives it; on non-members
   * config->rank is -1 and *comm must be set to NULL. May be NULL in the
   * table: the core then calls comm_create on the members only. */
  dist_error_t* (*comm_split)(dist_backend_comm_t* parent, const int32_t* ranks, size_t num_ranks,
                              const dist_comm_config_t* config, dist_backend_comm_t** comm);

  /* Fails every pending and future operation with DIST_ABORTED carrying
   * `reason`, and unblocks every waiter. Thread-safe; idempotent. */
  void (*comm_abort)(dist_backend_comm_t* comm, const char* reason);

  /* Waits for outstanding work (up to the timeout), then frees. NULL: no-op. */
  void (*comm_destroy)(dist_backend_comm_t* comm);

  /* Operations; NULL for an operation the backend does not support. */
  dist_backend_op_fn all_reduce;
  dist_backend_op_fn broadcast;
  dist_backend_op_fn reduce;
  dist_backend_op_fn all_gather;
  dist_backend_op_fn gather;
  dist_backend_op_fn scatter;
  dist_backend_op_fn reduce_scatter;
  dist_backend_op_fn all_to_all;
  dist_backend_op_fn barrier;
  dist_backend_op_fn send;
  dist_backend_op_fn recv;

  /* Blocks until the work completes or timeout_ms passes (< 0: forever is
   * NOT allowed; the core always passes a bound). Returns the operation's
   * error, DIST_DEADLINE_EXCEEDED on timeout (the work stays pending), or
   * NULL. May be called again after a timeout. */
  dist_error_t* (*work_wait)(dist_backend_work_t* work, int64_t timeout_ms);

  /* Non-blocking: *done = 1 when complete. Returns the operation's error
   * once done, else NULL. */
  dist_error_t* (*work_test)(dist_backend_work_t* work, int* done);

  /* Releases the handle. Safe before completion: the operation still runs to
   * its end, only the handle goes. NULL is a no-op. */
  void (*work_destroy)(dist_backend_work_t* work);

  /* ---- Appended in ABI 1.1 (read only when struct_size covers it) ---- */

  /* Optional (NULL if not DIST_CAP_STREAM_WAIT): makes `stream` wait for the
   * work without blocking the host (CUDA). */
  dist_error_t* (*work_wait_stream)(dist_backend_work_t* work, void* stream);

  /* ---- Appended in ABI 1.2 (read only when struct_size covers it) ---- */

  /* Optional (NULL: the core calls the operation's function above, then
   * work_wait and work_destroy). Runs one operation (`kind`, `args` as for
   * its function above) and returns once it is done, as issuing it and
   * waiting up to timeout_ms would: in order with the operations issued
   * before it, with the same checks and errors. DIST_DEADLINE_EXCEEDED when
   * timeout_ms passes first; the operation may then still be running, and
   * keeps using its buffers, as after work_destroy of unfinished work. The
   * core calls it for blocking calls (dist_all_reduce with work == NULL,
   * ...): with no handle to hand out, a backend can run the operation on
   * the calling thread without allocating anything. */
  dist_error_t* (*run)(dist_backend_comm_t* comm, dist_collective_t kind,
                       const dist_op_args_t* args, int64_t timeout_ms);

  /* ---- Appended in ABI 1.3 (read only when struct_size covers it) ---- */

  /* Optional (NULL: the core issues the send, then the recv, and waits for
   * both). Runs a send (`send`, as for the table's `send`) and a recv
   * (`recv`, as for `recv`) as if both were issued, in that order, and then
   * waited for, and returns once both are done: dist_sendrecv, the step of a
   * ring shift. The first error wins (the send's when both fail); both
   * argument structs are checked before either starts. DIST_DEADLINE_EXCEEDED
   * when timeout_ms passes first, with the same caveat as `run`. Lets a
   * backend move both on the calling thread with no work handles. */
  dist_error_t* (*run_sendrecv)(dist_backend_comm_t* comm, const dist_op_args_t* send,
                                const dist_op_args_t* recv, int64_t timeout_ms);

  /* ---- Appended in ABI 1.5 (read only when struct_size covers it) ---- */

  /* Optional (NULL: the core builds the variable-count collectives from
   * sendrecv and all_reduce, for every backend). Runs one collective with a
   * count per rank and returns once it is done, as `run` does: `kind` is
   * DIST_COLL_ALL_TO_ALL (dist_all_to_all_v), DIST_COLL_ALL_GATHER
   * (dist_all_gather_v) or DIST_COLL_REDUCE_SCATTER (dist_reduce_scatter_v);
   * `args` holds the whole buffers as the host passed them, the reduce op
   * and the timeout; `counts` the blocks. DIST_UNIMPLEMENTED hands a kind
   * back to the core, and must be the same answer on every rank (decided by
   * the kind alone, never by this rank's counts); any other error is the
   * operation's. */
  dist_error_t* (*run_v)(dist_backend_comm_t* comm, dist_collective_t kind,
                         const dist_op_args_t* args, const dist_op_counts_t* counts,
                         int64_t timeout_ms);
} dist_backend_plugin_t;

/* The entry symbol's type. */
typedef const dist_backend_plugin_t* (*dist_backend_plugin_entry_fn)(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DIST_BACKEND_PLUGIN_H_ */
