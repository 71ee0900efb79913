// dist conformance kit: the communicator under test, seen through one small
// interface so that the same checks drive a plugin's ABI table directly
// (AbiComm) or the core's host API (CoreComm).
#ifndef DIST_SDK_CONFORMANCE_COMM_H_
#define DIST_SDK_CONFORMANCE_COMM_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dist/backend_plugin.h"
#include "dist/dist.h"

namespace dist::conformance {

// One started operation.
class Work {
 public:
  virtual ~Work() = default;
  // The operation's status, DEADLINE_EXCEEDED if still running after
  // timeout_ms.
  virtual absl::Status Wait(int64_t timeout_ms) = 0;
  // Sets *done; returns the operation's error once done.
  virtual absl::Status Test(bool* done) = 0;
};

class Comm {
 public:
  virtual ~Comm() = default;
  virtual int32_t rank() const = 0;
  virtual int32_t world_size() const = 0;

  // Starts `coll` with the ABI's argument block (buffers per
  // dist/backend_plugin.h). Errors seen at once come back here.
  virtual absl::StatusOr<std::unique_ptr<Work>> Start(dist_collective_t coll,
                                                      const dist_op_args_t& args) = 0;

  // Runs `coll` to its end: the blocking form (the table's `run`, or dist.h's
  // call without a work handle) where there is one, else Start and Wait.
  virtual absl::Status Run(dist_collective_t coll, const dist_op_args_t& args, int64_t timeout_ms) {
    absl::StatusOr<std::unique_ptr<Work>> work = Start(coll, args);
    if (!work.ok()) return work.status();
    return (*work)->Wait(timeout_ms);
  }

  // A send and a recv in one call: the table's `run_sendrecv` (ABI 1.3) or
  // dist_sendrecv where there is one, else both started (in the order of
  // dist/cpp/sendrecv_order.hpp) and waited for. The first error wins.
  virtual absl::Status SendRecv(const dist_op_args_t& send, const dist_op_args_t& recv,
                                int64_t timeout_ms);

  // Collective over this communicator: a subgroup of `ranks` (ascending). On
  // members returns the new communicator; on non-members returns nullptr
  // after checking that non-membership is reported as the ABI says (an error
  // here means it was not).
  virtual absl::StatusOr<std::unique_ptr<Comm>> Split(const std::vector<int32_t>& ranks,
                                                      const std::string& name) = 0;

  // The dist.h group under a communicator driven through the core, for the
  // calls that exist only there; nullptr for a raw plugin table. Borrowed.
  virtual dist_process_group_t* core_group() { return nullptr; }

  // Collective over this communicator: a new communicator over the same
  // ranks, for checks that break it (abort, mismatched counts).
  virtual absl::StatusOr<std::unique_ptr<Comm>> Duplicate(const std::string& name,
                                                          int64_t timeout_ms) = 0;

  // Raw ABI only (UNIMPLEMENTED through the core, which fills its own
  // structs): like Duplicate and Start, but the config or argument block the
  // plugin gets says `struct_size` and every byte past the struct's own
  // fields, up to max(struct_size, sizeof), is garbage, as from an older
  // (smaller) or newer (larger) 1.x caller. For the struct_size rule of
  // sdk/ABI.md.
  virtual absl::StatusOr<std::unique_ptr<Comm>> DuplicateSized(const std::string& name,
                                                               int64_t timeout_ms,
                                                               size_t struct_size) {
    return absl::UnimplementedError("struct sizes are checked on the raw ABI only");
  }
  virtual absl::StatusOr<std::unique_ptr<Work>> StartSized(dist_collective_t coll,
                                                           const dist_op_args_t& args,
                                                           size_t struct_size) {
    return absl::UnimplementedError("struct sizes are checked on the raw ABI only");
  }

  virtual void Abort(const std::string& reason) = 0;

  // True when the driver can call an operation the backend left NULL (the
  // core answers for it); false for the raw ABI, where NULL means "absent".
  virtual bool HasOperation(dist_collective_t coll) const = 0;
};

// The plugin's table as loaded by the core (dist_load_backend).
struct LoadedPlugin {
  const dist_backend_plugin_t* table = nullptr;
  dist_backend_capabilities_t caps{};
  // work_wait_stream is read only when the table's struct_size covers it
  // (a plugin built against ABI 1.0 has a shorter table).
  bool has_work_wait_stream = false;
};

absl::StatusOr<LoadedPlugin> LoadPlugin(const std::string& name_or_path);

struct Rendezvous {
  std::string url;
  int32_t rank = -1;
  int32_t world_size = -1;
  int64_t timeout_ms = 60000;        // to meet
  int64_t group_timeout_ms = 30000;  // the communicator's default afterwards
};

// Drives the plugin's table directly: dist_rendezvous for the store, then
// comm_create / comm_split / ops / work_* / comm_abort / comm_destroy.
absl::StatusOr<std::unique_ptr<Comm>> CreateAbiComm(const LoadedPlugin& plugin,
                                                    const Rendezvous& rendezvous);

// Goes through the core: dist_init with backend = the plugin, then the host
// API (dist_all_reduce, dist_new_group, dist_abort, ...).
absl::StatusOr<std::unique_ptr<Comm>> CreateCoreComm(const std::string& plugin,
                                                     const Rendezvous& rendezvous);

// A group made through the core (dist_init, dist_shrink, dist_grow) as a
// communicator; it owns the group (dist_destroy when it is destroyed).
std::unique_ptr<Comm> AdoptCoreGroup(dist_process_group_t* group);

}  // namespace dist::conformance

#endif  // DIST_SDK_CONFORMANCE_COMM_H_
