/* dist SDK: the plain data types shared by the host API and every plugin.
 *
 * Plain C11; also compiles as C++. Enumerators are fixed forever: new values
 * are only ever appended (see sdk/ABI.md). */
#ifndef DIST_TYPES_H_
#define DIST_TYPES_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Symbol visibility for the core's public functions and plugin entry points. */
#if defined(__GNUC__)
#define DIST_EXPORT __attribute__((visibility("default")))
#else
#define DIST_EXPORT
#endif

/* Element types. */
typedef enum dist_dtype {
  DIST_INT8 = 0,
  DIST_UINT8 = 1,
  DIST_INT32 = 2,
  DIST_INT64 = 3,
  DIST_FLOAT16 = 4, /* IEEE 754 binary16 */
  DIST_BFLOAT16 = 5,
  DIST_FLOAT32 = 6,
  DIST_FLOAT64 = 7,
  DIST_DTYPE_COUNT = 8 /* grows when a dtype is appended */
} dist_dtype_t;

/* Reduction operators. AVG is SUM divided by the number of ranks (integer
 * types: truncating division). BAND/BOR/BXOR are defined on integer types
 * only; a floating-point dtype gets DIST_INVALID_ARGUMENT. */
typedef enum dist_reduce_op {
  DIST_SUM = 0,
  DIST_PRODUCT = 1,
  DIST_MIN = 2,
  DIST_MAX = 3,
  DIST_AVG = 4,
  DIST_BAND = 5,
  DIST_BOR = 6,
  DIST_BXOR = 7,
  DIST_REDUCE_OP_COUNT = 8
} dist_reduce_op_t;

typedef enum dist_device_type {
  DIST_DEVICE_CPU = 0,
  DIST_DEVICE_CUDA = 1,
  DIST_DEVICE_TYPE_COUNT = 2
} dist_device_type_t;

typedef struct dist_device {
  dist_device_type_t type;
  int32_t index; /* CUDA device ordinal; 0 for the CPU */
} dist_device_t;

/* The collectives and point-to-point operations, used in capability masks
 * and in error messages. */
typedef enum dist_collective {
  DIST_COLL_ALL_REDUCE = 0,
  DIST_COLL_BROADCAST = 1,
  DIST_COLL_REDUCE = 2,
  DIST_COLL_ALL_GATHER = 3,
  DIST_COLL_GATHER = 4,
  DIST_COLL_SCATTER = 5,
  DIST_COLL_REDUCE_SCATTER = 6,
  DIST_COLL_ALL_TO_ALL = 7,
  DIST_COLL_BARRIER = 8,
  DIST_COLL_SEND = 9,
  DIST_COLL_RECV = 10,
  DIST_COLLECTIVE_COUNT = 11
} dist_collective_t;

/* A buffer descriptor. Borrowed: the memory belongs to the caller and must
 * stay valid until the operation that uses it completes (its work handle
 * reports done, or the blocking call returns). */
typedef struct dist_buffer {
  void* data;     /* may be NULL only when count == 0 */
  uint64_t count; /* number of elements, not bytes */
  dist_dtype_t dtype;
  dist_device_t device;
  void* stream; /* CUDA: a cudaStream_t to order the operation on, or
                   NULL for the communicator's own stream. CPU: NULL. */
} dist_buffer_t;

/* A borrowed key/value string pair (backend options, rendezvous hints). */
typedef struct dist_kv {
  const char* key;
  const char* value;
} dist_kv_t;

/* Log levels, most severe first. */
typedef enum dist_log_level {
  DIST_LOG_ERROR = 0,
  DIST_LOG_WARN = 1,
  DIST_LOG_INFO = 2,
  DIST_LOG_DEBUG = 3,
  DIST_LOG_TRACE = 4
} dist_log_level_t;

/* Size in bytes of one element of `dtype`; 0 for an unknown dtype. */
static inline size_t dist_dtype_size(dist_dtype_t dtype) {
  switch (dtype) {
    case DIST_INT8:
    case DIST_UINT8:
      return 1;
    case DIST_FLOAT16:
    case DIST_BFLOAT16:
      return 2;
    case DIST_INT32:
    case DIST_FLOAT32:
      return 4;
    case DIST_INT64:
    case DIST_FLOAT64:
      return 8;
    default:
      return 0;
  }
}

static inline int dist_dtype_is_floating(dist_dtype_t dtype) {
  return dtype == DIST_FLOAT16 || dtype == DIST_BFLOAT16 || dtype == DIST_FLOAT32 ||
         dtype == DIST_FLOAT64;
}

static inline const char* dist_dtype_name(dist_dtype_t dtype) {
  switch (dtype) {
    case DIST_INT8:
      return "int8";
    case DIST_UINT8:
      return "uint8";
    case DIST_INT32:
      return "int32";
    case DIST_INT64:
      return "int64";
    case DIST_FLOAT16:
      return "float16";
    case DIST_BFLOAT16:
      return "bfloat16";
    case DIST_FLOAT32:
      return "float32";
    case DIST_FLOAT64:
      return "float64";
    default:
      return "unknown-dtype";
  }
}

static inline const char* dist_reduce_op_name(dist_reduce_op_t op) {
  switch (op) {
    case DIST_SUM:
      return "sum";
    case DIST_PRODUCT:
      return "product";
    case DIST_MIN:
      return "min";
    case DIST_MAX:
      return "max";
    case DIST_AVG:
      return "avg";
    case DIST_BAND:
      return "band";
    case DIST_BOR:
      return "bor";
    case DIST_BXOR:
      return "bxor";
    default:
      return "unknown-op";
  }
}

static inline const char* dist_collective_name(dist_collective_t c) {
  switch (c) {
    case DIST_COLL_ALL_REDUCE:
      return "all_reduce";
    case DIST_COLL_BROADCAST:
      return "broadcast";
    case DIST_COLL_REDUCE:
      return "reduce";
    case DIST_COLL_ALL_GATHER:
      return "all_gather";
    case DIST_COLL_GATHER:
      return "gather";
    case DIST_COLL_SCATTER:
      return "scatter";
    case DIST_COLL_REDUCE_SCATTER:
      return "reduce_scatter";
    case DIST_COLL_ALL_TO_ALL:
      return "all_to_all";
    case DIST_COLL_BARRIER:
      return "barrier";
    case DIST_COLL_SEND:
      return "send";
    case DIST_COLL_RECV:
      return "recv";
    default:
      return "unknown-collective";
  }
}

static inline const char* dist_device_type_name(dist_device_type_t t) {
  switch (t) {
    case DIST_DEVICE_CPU:
      return "cpu";
    case DIST_DEVICE_CUDA:
      return "cuda";
    default:
      return "unknown-device";
  }
}

/* Convenience constructors. */
static inline dist_device_t dist_cpu(void) {
  dist_device_t d;
  d.type = DIST_DEVICE_CPU;
  d.index = 0;
  return d;
}

static inline dist_device_t dist_cuda(int32_t index) {
  dist_device_t d;
  d.type = DIST_DEVICE_CUDA;
  d.index = index;
  return d;
}

static inline dist_buffer_t dist_make_buffer(void* data, uint64_t count, dist_dtype_t dtype,
                                             dist_device_t device) {
  dist_buffer_t b;
  b.data = data;
  b.count = count;
  b.dtype = dtype;
  b.device = device;
  b.stream = NULL;
  return b;
}

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DIST_TYPES_H_ */
