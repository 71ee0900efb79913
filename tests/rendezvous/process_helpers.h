// Starting rendezvous_worker processes for a scheme and world size.
#ifndef DIST_TESTS_RENDEZVOUS_PROCESS_HELPERS_H_
#define DIST_TESTS_RENDEZVOUS_PROCESS_HELPERS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/rendezvous/test_support.h"

namespace dist::testing {

// One job's shared settings: a fresh port or file per job.
struct Job {
  std::string scheme;
  int world_size = 1;
  int port = 0;
  std::string file;
  std::string extra_query;  // appended to tcp/file URLs ("&external=1")

  static Job Make(const std::string& scheme, int world_size) {
    Job job;
    job.scheme = scheme;
    job.world_size = world_size;
    job.port = FreePort();
    job.file = TempPath("rdzv");
    return job;
  }

  std::string Url(int rank) const {
    if (scheme == "tcp") {
      return absl::StrCat("tcp://127.0.0.1:", port, "?rank=", rank, "&world_size=", world_size,
                          extra_query);
    }
    if (scheme == "file") {
      return absl::StrCat("file://", file, "?rank=", rank, "&world_size=", world_size, extra_query);
    }
    return "env://";
  }

  // env:// ranks learn everything from the environment, like under torchrun.
  EnvList Env(int rank) const {
    if (scheme != "env") return {};
    return {{"MASTER_ADDR", "127.0.0.1"},         {"MASTER_PORT", std::to_string(port)},
            {"RANK", std::to_string(rank)},       {"WORLD_SIZE", std::to_string(world_size)},
            {"LOCAL_RANK", std::to_string(rank)}, {"LOCAL_WORLD_SIZE", std::to_string(world_size)}};
  }

  std::unique_ptr<Process> StartWorker(int rank, const std::string& mode,
                                       int64_t timeout_ms = 20000,
                                       std::vector<std::string> more_args = {},
                                       EnvList more_env = {}) const {
    std::vector<std::string> argv = {Runfile("tests/rendezvous/rendezvous_worker"),
                                     "--plugin=" + PluginPath(scheme), "--url=" + Url(rank),
                                     "--mode=" + mode, absl::StrCat("--timeout_ms=", timeout_ms)};
    argv.insert(argv.end(), more_args.begin(), more_args.end());
    EnvList env = Env(rank);
    env.insert(env.end(), more_env.begin(), more_env.end());
    auto process = Process::Start(argv, env);
    EXPECT_TRUE(process.ok()) << process.status();
    return process.ok() ? std::move(*process) : nullptr;
  }
};

}  // namespace dist::testing

#endif  // DIST_TESTS_RENDEZVOUS_PROCESS_HELPERS_H_
