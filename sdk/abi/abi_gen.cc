// Prints the binary layout of the dist C ABI as the headers it is compiled
// against define it: struct sizes, alignments and field offsets, enumerator
// values, constants and ABI versions. One item per line:
//
//   <abi> <kind> <name> <value>
//
// where <abi> says which version number covers the item: "plugin" (the
// backend plugin ABI and the types it shares: DIST_BACKEND_ABI_MINOR),
// "rendezvous" (rendezvous_plugin.h and store.h, whose table rendezvous
// plugins fill: DIST_RENDEZVOUS_ABI_MINOR) or "host" (dist.h and
// registry.h, DIST_VERSION_MINOR). Built against the frozen 1.0 headers it prints the
// 1.0 layout (without the host API, which those headers do not carry).
// sdk/abi/abi_v1.txt is this output plus libdist.so's exported symbols.
#include <cstddef>
#include <cstdio>
#include <string>

#include "dist/backend_plugin.h"
#include "dist/error.h"
#include "dist/host.h"
#include "dist/rendezvous_plugin.h"
#include "dist/store.h"
#include "dist/types.h"
#ifdef DIST_ABI_GEN_HOST_API
#include "dist/dist.h"
#include "dist/registry.h"
#endif

namespace {

void Line(const char* abi, const char* kind, const std::string& name, const std::string& value) {
  std::printf("%s %s %s %s\n", abi, kind, name.c_str(), value.c_str());
}

void Struct(const char* abi, const char* name, size_t size, size_t align) {
  Line(abi, "struct", name, "size " + std::to_string(size) + " align " + std::to_string(align));
}

void Field(const char* abi, const char* type, const char* field, size_t offset, size_t size) {
  Line(abi, "field", std::string(type) + "." + field,
       "offset " + std::to_string(offset) + " size " + std::to_string(size));
}

void Value(const char* abi, const char* kind, const char* name, long long value) {
  Line(abi, kind, name, std::to_string(value));
}

}  // namespace

#define STRUCT(abi, T) Struct(abi, #T, sizeof(T), alignof(T))
#define FIELD(abi, T, f) Field(abi, #T, #f, offsetof(T, f), sizeof(static_cast<T*>(nullptr)->f))
#define ENUM(abi, E) Value(abi, "enum", #E, static_cast<long long>(E))
#define ENUM_TYPE(abi, T) Value(abi, "enum_size", #T, static_cast<long long>(sizeof(T)))
#define CONST(abi, C) Value(abi, "const", #C, static_cast<long long>(C))
#define SYMBOL_NAME(abi, C) Line(abi, "const", #C, C)

int main() {
  const char* P = "plugin";
  const char* R = "rendezvous";
  Line(P, "version", "DIST_BACKEND_ABI",
       std::to_string(DIST_BACKEND_ABI_MAJOR) + "." + std::to_string(DIST_BACKEND_ABI_MINOR));
  Line(R, "version", "DIST_RENDEZVOUS_ABI",
       std::to_string(DIST_RENDEZVOUS_ABI_MAJOR) + "." + std::to_string(DIST_RENDEZVOUS_ABI_MINOR));
  SYMBOL_NAME(P, DIST_BACKEND_ENTRY_SYMBOL);
  SYMBOL_NAME(R, DIST_RENDEZVOUS_ENTRY_SYMBOL);

  // types.h
  ENUM_TYPE(P, dist_dtype_t);
  ENUM(P, DIST_INT8);
  ENUM(P, DIST_UINT8);
  ENUM(P, DIST_INT32);
  ENUM(P, DIST_INT64);
  ENUM(P, DIST_FLOAT16);
  ENUM(P, DIST_BFLOAT16);
  ENUM(P, DIST_FLOAT32);
  ENUM(P, DIST_FLOAT64);
  ENUM(P, DIST_DTYPE_COUNT);
  ENUM_TYPE(P, dist_reduce_op_t);
  ENUM(P, DIST_SUM);
  ENUM(P, DIST_PRODUCT);
  ENUM(P, DIST_MIN);
  ENUM(P, DIST_MAX);
  ENUM(P, DIST_AVG);
  ENUM(P, DIST_BAND);
  ENUM(P, DIST_BOR);
  ENUM(P, DIST_BXOR);
  ENUM(P, DIST_REDUCE_OP_COUNT);
  ENUM_TYPE(P, dist_device_type_t);
  ENUM(P, DIST_DEVICE_CPU);
  ENUM(P, DIST_DEVICE_CUDA);
  ENUM(P, DIST_DEVICE_TYPE_COUNT);
  ENUM_TYPE(P, dist_collective_t);
  ENUM(P, DIST_COLL_ALL_REDUCE);
  ENUM(P, DIST_COLL_BROADCAST);
  ENUM(P, DIST_COLL_REDUCE);
  ENUM(P, DIST_COLL_ALL_GATHER);
  ENUM(P, DIST_COLL_GATHER);
  ENUM(P, DIST_COLL_SCATTER);
  ENUM(P, DIST_COLL_REDUCE_SCATTER);
  ENUM(P, DIST_COLL_ALL_TO_ALL);
  ENUM(P, DIST_COLL_BARRIER);
  ENUM(P, DIST_COLL_SEND);
  ENUM(P, DIST_COLL_RECV);
  ENUM(P, DIST_COLLECTIVE_COUNT);
  ENUM_TYPE(P, dist_log_level_t);
  ENUM(P, DIST_LOG_ERROR);
  ENUM(P, DIST_LOG_WARN);
  ENUM(P, DIST_LOG_INFO);
  ENUM(P, DIST_LOG_DEBUG);
  ENUM(P, DIST_LOG_TRACE);
  STRUCT(P, dist_device_t);
  FIELD(P, dist_device_t, type);
  FIELD(P, dist_device_t, index);
  STRUCT(P, dist_buffer_t);
  FIELD(P, dist_buffer_t, data);
  FIELD(P, dist_buffer_t, count);
  FIELD(P, dist_buffer_t, dtype);
  FIELD(P, dist_buffer_t, device);
  FIELD(P, dist_buffer_t, stream);
  STRUCT(P, dist_kv_t);
  FIELD(P, dist_kv_t, key);
  FIELD(P, dist_kv_t, value);

  // error.h
  ENUM_TYPE(P, dist_error_code_t);
  ENUM(P, DIST_OK);
  ENUM(P, DIST_CANCELLED);
  ENUM(P, DIST_UNKNOWN);
  ENUM(P, DIST_INVALID_ARGUMENT);
  ENUM(P, DIST_DEADLINE_EXCEEDED);
  ENUM(P, DIST_NOT_FOUND);
  ENUM(P, DIST_ALREADY_EXISTS);
  ENUM(P, DIST_PERMISSION_DENIED);
  ENUM(P, DIST_RESOURCE_EXHAUSTED);
  ENUM(P, DIST_FAILED_PRECONDITION);
  ENUM(P, DIST_ABORTED);
  ENUM(P, DIST_OUT_OF_RANGE);
  ENUM(P, DIST_UNIMPLEMENTED);
  ENUM(P, DIST_INTERNAL);
  ENUM(P, DIST_UNAVAILABLE);
  ENUM(P, DIST_DATA_LOSS);
  ENUM(P, DIST_UNAUTHENTICATED);
#if DIST_BACKEND_ABI_MINOR >= 4
  ENUM(P, DIST_REVOKED);
#endif
  STRUCT(P, dist_error_t);
  FIELD(P, dist_error_t, struct_size);
  FIELD(P, dist_error_t, code);
  FIELD(P, dist_error_t, message);
  FIELD(P, dist_error_t, destroy);

  // store.h: versioned with the rendezvous ABI, whose plugins fill the table
  // (backends and the core only hold stores).
  CONST(R, DIST_STORE_MAX_KEY_BYTES);
  CONST(R, DIST_STORE_MAX_VALUE_BYTES);
  STRUCT(R, dist_store_t);
  FIELD(R, dist_store_t, struct_size);
  FIELD(R, dist_store_t, ctx);
  FIELD(R, dist_store_t, set);
  FIELD(R, dist_store_t, get);
  FIELD(R, dist_store_t, free_value);
  FIELD(R, dist_store_t, add);
  FIELD(R, dist_store_t, compare_set);
  FIELD(R, dist_store_t, remove);
  FIELD(R, dist_store_t, check);
  FIELD(R, dist_store_t, wait);
  FIELD(R, dist_store_t, num_keys);
  FIELD(R, dist_store_t, release);
#if DIST_RENDEZVOUS_ABI_MINOR >= 1
  FIELD(R, dist_store_t, release_failed);
#endif

  // host.h
  STRUCT(P, dist_host_api_t);
  FIELD(P, dist_host_api_t, struct_size);
  FIELD(P, dist_host_api_t, abi_major);
  FIELD(P, dist_host_api_t, abi_minor);
  FIELD(P, dist_host_api_t, core_version);
  FIELD(P, dist_host_api_t, log);
  FIELD(P, dist_host_api_t, log_enabled);
  FIELD(P, dist_host_api_t, store_with_prefix);

  // backend_plugin.h
  CONST(P, DIST_CAP_SUBGROUPS);
  CONST(P, DIST_CAP_STREAM_WAIT);
  CONST(P, DIST_CAP_THREAD_MULTIPLE);
  CONST(P, DIST_CAP_NEEDS_LAUNCHER);
  CONST(P, DIST_CAP_CUDA_AWARE);
#if DIST_BACKEND_ABI_MINOR >= 5
  CONST(P, DIST_CAP_SHRINK);
  CONST(P, DIST_CAP_SPLIT_ORDERED);
  STRUCT(P, dist_op_counts_t);
  FIELD(P, dist_op_counts_t, struct_size);
  FIELD(P, dist_op_counts_t, send_counts);
  FIELD(P, dist_op_counts_t, send_displs);
  FIELD(P, dist_op_counts_t, recv_counts);
  FIELD(P, dist_op_counts_t, recv_displs);
#endif
#if DIST_BACKEND_ABI_MINOR >= 2
  CONST(P, DIST_OP_ARGS_CHECKED);
#endif
  STRUCT(P, dist_backend_capabilities_t);
  FIELD(P, dist_backend_capabilities_t, struct_size);
  FIELD(P, dist_backend_capabilities_t, device_types);
  FIELD(P, dist_backend_capabilities_t, dtypes);
  FIELD(P, dist_backend_capabilities_t, collectives);
  FIELD(P, dist_backend_capabilities_t, all_reduce_ops);
  FIELD(P, dist_backend_capabilities_t, reduce_ops);
  FIELD(P, dist_backend_capabilities_t, reduce_scatter_ops);
  FIELD(P, dist_backend_capabilities_t, flags);
  FIELD(P, dist_backend_capabilities_t, notes);
  STRUCT(P, dist_comm_config_t);
  FIELD(P, dist_comm_config_t, struct_size);
  FIELD(P, dist_comm_config_t, rank);
  FIELD(P, dist_comm_config_t, world_size);
  FIELD(P, dist_comm_config_t, local_rank);
  FIELD(P, dist_comm_config_t, local_world_size);
  FIELD(P, dist_comm_config_t, store);
  FIELD(P, dist_comm_config_t, timeout_ms);
  FIELD(P, dist_comm_config_t, options);
  FIELD(P, dist_comm_config_t, num_options);
  FIELD(P, dist_comm_config_t, group_name);
  FIELD(P, dist_comm_config_t, device_index);
  STRUCT(P, dist_op_args_t);
  FIELD(P, dist_op_args_t, struct_size);
  FIELD(P, dist_op_args_t, send);
  FIELD(P, dist_op_args_t, recv);
  FIELD(P, dist_op_args_t, op);
  FIELD(P, dist_op_args_t, root);
  FIELD(P, dist_op_args_t, peer);
  FIELD(P, dist_op_args_t, tag);
  FIELD(P, dist_op_args_t, timeout_ms);
#if DIST_BACKEND_ABI_MINOR >= 2
  FIELD(P, dist_op_args_t, flags);
#endif
  STRUCT(P, dist_backend_plugin_t);
  FIELD(P, dist_backend_plugin_t, struct_size);
  FIELD(P, dist_backend_plugin_t, abi_major);
  FIELD(P, dist_backend_plugin_t, abi_minor);
  FIELD(P, dist_backend_plugin_t, name);
  FIELD(P, dist_backend_plugin_t, version);
  FIELD(P, dist_backend_plugin_t, initialize);
  FIELD(P, dist_backend_plugin_t, library_version);
  FIELD(P, dist_backend_plugin_t, probe);
  FIELD(P, dist_backend_plugin_t, get_capabilities);
  FIELD(P, dist_backend_plugin_t, comm_create);
  FIELD(P, dist_backend_plugin_t, comm_split);
  FIELD(P, dist_backend_plugin_t, comm_abort);
  FIELD(P, dist_backend_plugin_t, comm_destroy);
  FIELD(P, dist_backend_plugin_t, all_reduce);
  FIELD(P, dist_backend_plugin_t, broadcast);
  FIELD(P, dist_backend_plugin_t, reduce);
  FIELD(P, dist_backend_plugin_t, all_gather);
  FIELD(P, dist_backend_plugin_t, gather);
  FIELD(P, dist_backend_plugin_t, scatter);
  FIELD(P, dist_backend_plugin_t, reduce_scatter);
  FIELD(P, dist_backend_plugin_t, all_to_all);
  FIELD(P, dist_backend_plugin_t, barrier);
  FIELD(P, dist_backend_plugin_t, send);
  FIELD(P, dist_backend_plugin_t, recv);
  FIELD(P, dist_backend_plugin_t, work_wait);
  FIELD(P, dist_backend_plugin_t, work_test);
  FIELD(P, dist_backend_plugin_t, work_destroy);
#if DIST_BACKEND_ABI_MINOR >= 1
  FIELD(P, dist_backend_plugin_t, work_wait_stream);
#endif
#if DIST_BACKEND_ABI_MINOR >= 2
  FIELD(P, dist_backend_plugin_t, run);
#endif
#if DIST_BACKEND_ABI_MINOR >= 3
  FIELD(P, dist_backend_plugin_t, run_sendrecv);
#endif
#if DIST_BACKEND_ABI_MINOR >= 5
  FIELD(P, dist_backend_plugin_t, run_v);
#endif

  // rendezvous_plugin.h
  STRUCT(R, dist_rendezvous_hints_t);
  FIELD(R, dist_rendezvous_hints_t, struct_size);
  FIELD(R, dist_rendezvous_hints_t, rank);
  FIELD(R, dist_rendezvous_hints_t, world_size);
  FIELD(R, dist_rendezvous_hints_t, options);
  FIELD(R, dist_rendezvous_hints_t, num_options);
  STRUCT(R, dist_rendezvous_result_t);
  FIELD(R, dist_rendezvous_result_t, struct_size);
  FIELD(R, dist_rendezvous_result_t, rank);
  FIELD(R, dist_rendezvous_result_t, world_size);
  FIELD(R, dist_rendezvous_result_t, local_rank);
  FIELD(R, dist_rendezvous_result_t, local_world_size);
  FIELD(R, dist_rendezvous_result_t, store);
  STRUCT(R, dist_rendezvous_plugin_t);
  FIELD(R, dist_rendezvous_plugin_t, struct_size);
  FIELD(R, dist_rendezvous_plugin_t, abi_major);
  FIELD(R, dist_rendezvous_plugin_t, abi_minor);
  FIELD(R, dist_rendezvous_plugin_t, name);
  FIELD(R, dist_rendezvous_plugin_t, version);
  FIELD(R, dist_rendezvous_plugin_t, schemes);
  FIELD(R, dist_rendezvous_plugin_t, initialize);
  FIELD(R, dist_rendezvous_plugin_t, resolve);

#ifdef DIST_ABI_GEN_HOST_API
  const char* H = "host";
  Line(H, "version", "DIST_VERSION",
       std::to_string(DIST_VERSION_MAJOR) + "." + std::to_string(DIST_VERSION_MINOR));
  STRUCT(H, dist_init_options_t);
  FIELD(H, dist_init_options_t, struct_size);
  FIELD(H, dist_init_options_t, backend);
  FIELD(H, dist_init_options_t, init_method);
  FIELD(H, dist_init_options_t, rank);
  FIELD(H, dist_init_options_t, world_size);
  FIELD(H, dist_init_options_t, timeout_ms);
  FIELD(H, dist_init_options_t, config_file);
  FIELD(H, dist_init_options_t, options);
  FIELD(H, dist_init_options_t, num_options);
  FIELD(H, dist_init_options_t, group_name);
  ENUM_TYPE(H, dist_plugin_kind_t);
  ENUM(H, DIST_PLUGIN_BACKEND);
  ENUM(H, DIST_PLUGIN_RENDEZVOUS);
  ENUM_TYPE(H, dist_plugin_status_t);
  ENUM(H, DIST_PLUGIN_OK);
  ENUM(H, DIST_PLUGIN_UNAVAILABLE);
  ENUM(H, DIST_PLUGIN_LOAD_FAILED);
  ENUM(H, DIST_PLUGIN_BAD_ABI);
  ENUM(H, DIST_PLUGIN_INIT_FAILED);
  ENUM(H, DIST_PLUGIN_SHADOWED);
  STRUCT(H, dist_plugin_info_t);
  FIELD(H, dist_plugin_info_t, struct_size);
  FIELD(H, dist_plugin_info_t, kind);
  FIELD(H, dist_plugin_info_t, name);
  FIELD(H, dist_plugin_info_t, path);
  FIELD(H, dist_plugin_info_t, status);
  FIELD(H, dist_plugin_info_t, reason);
  FIELD(H, dist_plugin_info_t, abi_major);
  FIELD(H, dist_plugin_info_t, abi_minor);
  FIELD(H, dist_plugin_info_t, version);
  FIELD(H, dist_plugin_info_t, library_version);
  FIELD(H, dist_plugin_info_t, capabilities);
  FIELD(H, dist_plugin_info_t, schemes);
  STRUCT(H, dist_config_entry_t);
  FIELD(H, dist_config_entry_t, struct_size);
  FIELD(H, dist_config_entry_t, key);
  FIELD(H, dist_config_entry_t, value);
  FIELD(H, dist_config_entry_t, source);
  STRUCT(H, dist_shrink_options_t);
  FIELD(H, dist_shrink_options_t, struct_size);
  FIELD(H, dist_shrink_options_t, timeout_ms);
  STRUCT(H, dist_grow_options_t);
  FIELD(H, dist_grow_options_t, struct_size);
  FIELD(H, dist_grow_options_t, timeout_ms);
  FIELD(H, dist_grow_options_t, joiners);
#endif
  return 0;
}
