// Test harness for the MPI plugin: loads libdist-backend-mpi.so the way the
// core does (dlopen RTLD_LOCAL, dist_backend_plugin_v1), hands it a small
// host table and a directory-backed store, and offers checks that name the
// rank. Header-only; used by the drivers under mpirun.
#ifndef DIST_TESTS_MPI_HARNESS_H_
#define DIST_TESTS_MPI_HARNESS_H_

#include <dirent.h>
#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "dist/backend_plugin.h"

namespace mpitest {

inline int g_rank = -1;  // for messages, from the launcher's environment
inline int g_failures = 0;

inline int EnvInt(const char* name, int fallback) {
  const char* value = std::getenv(name);
  return value ? std::atoi(value) : fallback;
}

#define MT_CHECK(cond)                                                                        \
  do {                                                                                        \
    if (!(cond)) {                                                                            \
      std::fprintf(stderr, "[rank %d] CHECK FAILED %s:%d: %s\n", ::mpitest::g_rank, __FILE__, \
                   __LINE__, #cond);                                                          \
      ++::mpitest::g_failures;                                                                \
    }                                                                                         \
  } while (0)

// Fails (and stops) when `error` is not NULL.
#define MT_OK(expr)                                                                               \
  do {                                                                                            \
    dist_error_t* mt_error_ = (expr);                                                             \
    if (mt_error_ != nullptr) {                                                                   \
      std::fprintf(stderr, "[rank %d] FAILED %s:%d: %s -> %s: %s\n", ::mpitest::g_rank, __FILE__, \
                   __LINE__, #expr, dist_error_code_name(mt_error_->code), mt_error_->message);   \
      std::exit(1);                                                                               \
    }                                                                                             \
  } while (0)

// Checks that `error` has `code` and a message containing `needle`; frees it.
inline void ExpectError(dist_error_t* error, dist_error_code_t code, const char* needle,
                        const char* what, int line) {
  if (error == nullptr) {
    std::fprintf(stderr, "[rank %d] line %d: %s succeeded, expected %s\n", g_rank, line, what,
                 dist_error_code_name(code));
    ++g_failures;
    return;
  }
  std::fprintf(stderr, "[rank %d] expected error from %s: %s: %s\n", g_rank, what,
               dist_error_code_name(error->code), error->message);
  if (error->code != code || std::strstr(error->message, needle) == nullptr) {
    std::fprintf(stderr, "[rank %d] line %d: wanted %s containing \"%s\"\n", g_rank, line,
                 dist_error_code_name(code), needle);
    ++g_failures;
  }
  dist_error_destroy(error);
}
#define MT_EXPECT_ERROR(expr, code, needle) \
  ::mpitest::ExpectError((expr), (code), (needle), #expr, __LINE__)

// ---- host services ------------------------------------------------------

inline void HostLog(dist_log_level_t level, const char* component, const char* message) {
  std::fprintf(stderr, "[dist r%d %s] %d: %s\n", g_rank, component, static_cast<int>(level),
               message);
}
inline int HostLogEnabled(dist_log_level_t level) { return level <= DIST_LOG_INFO; }
inline dist_error_t* HostStoreWithPrefix(const dist_store_t*, const char*, dist_store_t**) {
  return dist_error_new(DIST_UNIMPLEMENTED, "test host: store_with_prefix not provided");
}

inline const dist_host_api_t* TestHost() {
  static const dist_host_api_t host = {
      sizeof(dist_host_api_t), 1, 1, "test", &HostLog, &HostLogEnabled, &HostStoreWithPrefix};
  return &host;
}

// ---- a store in a shared directory (one file per key) -------------------

class DirStore {
 public:
  explicit DirStore(std::string dir) : dir_(std::move(dir)) {
    mkdir(dir_.c_str(), 0755);
    store_ = dist_store_t{};  // optional fields appended later stay NULL
    store_.struct_size = sizeof(dist_store_t);
    store_.ctx = this;
    store_.set = &Set;
    store_.get = &Get;
    store_.free_value = [](void*, void* value) { std::free(value); };
    store_.add = [](void*, const char*, int64_t, int64_t*) {
      return dist_error_new(DIST_UNIMPLEMENTED, "DirStore: add");
    };
    store_.compare_set = [](void*, const char*, const void*, size_t, const void*, size_t, void**,
                            size_t*) {
      return dist_error_new(DIST_UNIMPLEMENTED, "DirStore: compare_set");
    };
    store_.remove = [](void* ctx, const char* key, int* existed) -> dist_error_t* {
      int gone = unlink(static_cast<DirStore*>(ctx)->Path(key).c_str()) == 0;
      if (existed) *existed = gone;
      return nullptr;
    };
    store_.check = &Check;
    store_.wait = [](void*, const char* const*, size_t, int64_t) {
      return dist_error_new(DIST_UNIMPLEMENTED, "DirStore: wait");
    };
    store_.num_keys = [](void*, int64_t*) {
      return dist_error_new(DIST_UNIMPLEMENTED, "DirStore: num_keys");
    };
    store_.release = [](void*) {};
  }
  dist_store_t* store() { return &store_; }

 private:
  std::string Path(const char* key) const {
    std::string name;
    for (const char* p = key; *p; ++p) name += (*p == '/') ? '%' : *p;
    return dir_ + "/" + name;
  }
  static dist_error_t* Set(void* ctx, const char* key, const void* value, size_t size) {
    auto* self = static_cast<DirStore*>(ctx);
    const std::string path = self->Path(key);
    const std::string tmp = path + ".tmp." + std::to_string(getpid());
    std::ofstream(tmp, std::ios::binary).write(static_cast<const char*>(value), size);
    std::rename(tmp.c_str(), path.c_str());
    return nullptr;
  }
  static dist_error_t* Get(void* ctx, const char* key, int64_t timeout_ms, void** value,
                           size_t* size) {
    auto* self = static_cast<DirStore*>(ctx);
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(timeout_ms < 0 ? 30000 : timeout_ms);
    while (true) {
      std::ifstream in(self->Path(key), std::ios::binary);
      if (in) {
        std::stringstream data;
        data << in.rdbuf();
        const std::string text = data.str();
        *size = text.size();
        *value = std::malloc(text.size() + 1);
        std::memcpy(*value, text.data(), text.size());
        return nullptr;
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        return dist_error_new(DIST_DEADLINE_EXCEEDED, "DirStore: key %s not set", key);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  static dist_error_t* Check(void* ctx, const char* const* keys, size_t n, int* all) {
    auto* self = static_cast<DirStore*>(ctx);
    *all = 1;
    struct stat st;
    for (size_t i = 0; i < n; ++i) {
      if (stat(self->Path(keys[i]).c_str(), &st) != 0) *all = 0;
    }
    return nullptr;
  }

  std::string dir_;
  dist_store_t store_;
};

// ---- loading the plugin ---------------------------------------------------

inline const dist_backend_plugin_t* LoadPlugin(const char* path) {
  // As the core does: RTLD_LOCAL, so libmpi is not global unless the plugin
  // makes it so.
  void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    std::fprintf(stderr, "[rank %d] dlopen %s: %s\n", g_rank, path, dlerror());
    std::exit(1);
  }
  auto entry =
      reinterpret_cast<dist_backend_plugin_entry_fn>(dlsym(handle, DIST_BACKEND_ENTRY_SYMBOL));
  if (entry == nullptr) {
    std::fprintf(stderr, "[rank %d] no %s in %s\n", g_rank, DIST_BACKEND_ENTRY_SYMBOL, path);
    std::exit(1);
  }
  const dist_backend_plugin_t* plugin = entry();
  MT_OK(plugin->initialize(TestHost()));
  return plugin;
}

// What every plugin driver starts with: `<plugin.so> <scenario> [...]`, the
// rank and size mpirun gave it, and the loaded plugin.
struct DriverStart {
  const dist_backend_plugin_t* plugin = nullptr;
  int rank = 0;
  int world = 1;
  std::string scenario;
};

// Prints the usage and returns false when the arguments are missing.
inline bool StartDriver(int argc, char** argv, DriverStart* start) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s <libdist-backend-mpi.so> <scenario> [store_dir]\n", argv[0]);
    return false;
  }
  // Open MPI's mpirun, else MPICH's Hydra (PMI_*).
  start->rank = EnvInt("OMPI_COMM_WORLD_RANK", EnvInt("PMI_RANK", 0));
  start->world = EnvInt("OMPI_COMM_WORLD_SIZE", EnvInt("PMI_SIZE", 1));
  g_rank = start->rank;
  start->plugin = LoadPlugin(argv[1]);
  start->scenario = argv[2];
  return true;
}

inline dist_comm_config_t MakeConfig(int rank, int world_size, dist_store_t* store,
                                     int64_t timeout_ms, const char* name) {
  dist_comm_config_t config;
  std::memset(&config, 0, sizeof(config));
  config.struct_size = sizeof(config);
  config.rank = rank;
  config.world_size = world_size;
  config.local_rank = -1;
  config.local_world_size = -1;
  config.store = store;
  config.timeout_ms = timeout_ms;
  config.group_name = name;
  config.device_index = -1;
  return config;
}

inline dist_op_args_t MakeArgs(dist_buffer_t send, dist_buffer_t recv) {
  dist_op_args_t args;
  std::memset(&args, 0, sizeof(args));
  args.struct_size = sizeof(args);
  args.send = send;
  args.recv = recv;
  return args;
}

// Runs one op and waits for it (30 s bound).
inline dist_error_t* RunAndWait(const dist_backend_plugin_t* plugin, dist_backend_op_fn fn,
                                dist_backend_comm_t* comm, const dist_op_args_t& args) {
  dist_backend_work_t* work = nullptr;
  dist_error_t* error = fn(comm, &args, &work);
  if (error != nullptr) return error;
  error = plugin->work_wait(work, 30000);
  plugin->work_destroy(work);
  return error;
}

}  // namespace mpitest

#endif  // DIST_TESTS_MPI_HARNESS_H_
