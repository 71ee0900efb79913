// The SDK runtime (dist/cpp/runtime.hpp) with a transport that records what
// it is asked to run: issue order and numbering, where operations run,
// bounded waits, revoke and abort, destroy with work pending, callbacks.
#include "dist/cpp/runtime.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace {

struct Ran {
  dist_collective_t kind;
  int32_t peer;
  int64_t tag;
  uint64_t seq;
  std::thread::id thread;
  absl::Duration budget;  // deadline - start
};

// Shared with the test, which keeps it after the communicator owns the transport.
struct Record {
  absl::Mutex mu;
  std::vector<Ran> ran ABSL_GUARDED_BY(mu);
  std::atomic<int> interrupts{0};
  // Execute blocks until this is notified or the communicator is interrupted.
  absl::Notification release;
  std::atomic<bool> block{false};
};

class RecordingTransport : public dist::Transport {
 public:
  explicit RecordingTransport(std::shared_ptr<Record> record) : record_(std::move(record)) {}

  absl::Status Check(dist_collective_t kind, const dist_op_args_t& args) override {
    if (kind == DIST_COLL_BROADCAST && args.root == 7) {
      return absl::UnimplementedError("recording: root 7 is not taken");
    }
    return absl::OkStatus();
  }

  absl::Status Execute(const dist::Op& op, dist::OpContext& ctx) override {
    {
      absl::MutexLock lock(&record_->mu);
      record_->ran.push_back({op.kind, op.args.peer, op.args.tag, op.seq,
                              std::this_thread::get_id(), op.deadline - absl::Now()});
    }
    while (record_->block.load() && !record_->release.HasBeenNotified()) {
      DIST_RETURN_IF_ERROR(ctx.Interrupted());
      if (absl::Now() > op.deadline) return absl::DeadlineExceededError("recording: deadline");
      absl::SleepFor(absl::Milliseconds(1));
    }
    if (op.args.tag == 99) {
      ctx.Revoke(absl::UnavailableError("recording: peer 1 died"));
      return absl::UnavailableError("recording: peer 1 died");
    }
    return absl::OkStatus();
  }

  void Interrupt(const absl::Status&) override { record_->interrupts++; }

 private:
  std::shared_ptr<Record> record_;
};

dist_comm_config_t Config(int64_t timeout_ms = 5000) {
  dist_comm_config_t config{};
  config.struct_size = sizeof(config);
  config.rank = 0;
  config.world_size = 2;
  config.timeout_ms = timeout_ms;
  config.group_name = "g";
  return config;
}

dist_op_args_t Args(int32_t peer = 1, int64_t tag = 0) {
  dist_op_args_t args{};
  args.struct_size = sizeof(args);
  args.peer = peer;
  args.tag = tag;
  return args;
}

std::unique_ptr<dist::BackendComm> Make(const std::shared_ptr<Record>& record,
                                        int64_t timeout_ms = 5000) {
  return *dist::MakeRuntimeComm(Config(timeout_ms), std::make_unique<RecordingTransport>(record));
}

TEST(RuntimeTest, RunsInIssueOrderAndNumbersPerKindPeerAndTag) {
  auto record = std::make_shared<Record>();
  auto comm = Make(record);
  const std::vector<std::pair<dist_collective_t, dist_op_args_t>> issued = {
      {DIST_COLL_ALL_REDUCE, Args()}, {DIST_COLL_SEND, Args(1, 5)}, {DIST_COLL_SEND, Args(1, 5)},
      {DIST_COLL_SEND, Args(1, 6)},   {DIST_COLL_RECV, Args(1, 5)}, {DIST_COLL_BARRIER, Args()},
      {DIST_COLL_SEND, Args(1, 5)},   {DIST_COLL_RECV, Args(1, 5)}};
  const std::vector<uint64_t> expected_seq = {0, 0, 1, 0, 0, 1, 2, 1};
  std::vector<std::unique_ptr<dist::BackendWork>> works;
  for (const auto& [kind, args] : issued) works.push_back(*comm->Issue(kind, args));
  // Waited in reverse: completion order is issue order anyway.
  for (auto it = works.rbegin(); it != works.rend(); ++it) {
    EXPECT_TRUE((*it)->Wait(absl::Seconds(5)).ok());
  }
  absl::MutexLock lock(&record->mu);
  ASSERT_EQ(record->ran.size(), issued.size());
  for (size_t i = 0; i < issued.size(); ++i) {
    EXPECT_EQ(record->ran[i].kind, issued[i].first) << i;
    EXPECT_EQ(record->ran[i].tag, issued[i].second.tag) << i;
    EXPECT_EQ(record->ran[i].seq, expected_seq[i]) << i;
  }
}

TEST(RuntimeTest, BlockingCallRunsOnTheCallersThreadAsyncOnAWorker) {
  auto record = std::make_shared<Record>();
  auto comm = Make(record);
  ASSERT_TRUE(comm->Run(DIST_COLL_BARRIER, Args(), absl::Seconds(5)).ok());
  auto work = *comm->Issue(DIST_COLL_BARRIER, Args());
  bool done = false;
  for (int i = 0; i < 5000 && !done; ++i) {
    ASSERT_TRUE(work->Test(&done).ok());
    if (!done) absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_TRUE(done);
  absl::MutexLock lock(&record->mu);
  ASSERT_EQ(record->ran.size(), 2u);
  EXPECT_EQ(record->ran[0].thread, std::this_thread::get_id());
  EXPECT_NE(record->ran[1].thread, std::this_thread::get_id());
  EXPECT_EQ(record->ran[1].seq, 1u);  // numbered after the inline one
}

TEST(RuntimeTest, DeadlineIsTheOperationsTimeoutElseTheCommunicators) {
  auto record = std::make_shared<Record>();
  auto comm = Make(record, 4000);
  dist_op_args_t own = Args();
  own.timeout_ms = 300;
  ASSERT_TRUE(comm->Run(DIST_COLL_BARRIER, own, absl::Seconds(5)).ok());
  ASSERT_TRUE(comm->Run(DIST_COLL_BARRIER, Args(), absl::Seconds(5)).ok());
  absl::MutexLock lock(&record->mu);
  EXPECT_LE(record->ran[0].budget, absl::Milliseconds(300));
  EXPECT_GT(record->ran[0].budget, absl::Milliseconds(250));
  EXPECT_LE(record->ran[1].budget, absl::Milliseconds(4000));
  EXPECT_GT(record->ran[1].budget, absl::Milliseconds(3900));
}

TEST(RuntimeTest, TransportChecksRefuseBeforeNumbering) {
  auto record = std::make_shared<Record>();
  auto comm = Make(record);
  dist_op_args_t bad = Args();
  bad.root = 7;
  EXPECT_EQ(comm->Issue(DIST_COLL_BROADCAST, bad).status().code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(comm->Run(DIST_COLL_BROADCAST, bad, absl::Seconds(1)).code(),
            absl::StatusCode::kUnimplemented);
  ASSERT_TRUE(comm->Run(DIST_COLL_BROADCAST, Args(), absl::Seconds(5)).ok());
  absl::MutexLock lock(&record->mu);
  ASSERT_EQ(record->ran.size(), 1u);
  EXPECT_EQ(record->ran[0].seq, 0u);
}

TEST(RuntimeTest, WaitIsBoundedAndTheWorkStaysPending) {
  auto record = std::make_shared<Record>();
  record->block = true;
  auto comm = Make(record);
  auto work = *comm->Issue(DIST_COLL_ALL_REDUCE, Args());
  const absl::Time start = absl::Now();
  absl::Status first = work->Wait(absl::Milliseconds(50));
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  EXPECT_EQ(first.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(first.message().find("all_reduce on group 'g' still runs"), std::string::npos) << first;
  record->release.Notify();
  EXPECT_TRUE(work->Wait(absl::Seconds(5)).ok());
}

TEST(RuntimeTest, AbortFailsRunningQueuedAndLaterOperationsAtOnce) {
  auto record = std::make_shared<Record>();
  record->block = true;
  auto comm = Make(record, 60000);
  auto running = *comm->Issue(DIST_COLL_ALL_REDUCE, Args());
  auto queued = *comm->Issue(DIST_COLL_BROADCAST, Args());
  std::thread aborter([&] {
    absl::SleepFor(absl::Milliseconds(50));
    comm->Abort("rank 3 is gone");
  });
  const absl::Time start = absl::Now();
  for (auto* work : {running.get(), queued.get()}) {
    absl::Status status = work->Wait(absl::Seconds(30));
    EXPECT_EQ(status.code(), absl::StatusCode::kAborted);
    EXPECT_NE(status.message().find("communicator aborted: rank 3 is gone"), std::string::npos)
        << status;
  }
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  aborter.join();
  comm->Abort("again");  // idempotent: the first reason stays
  EXPECT_EQ(record->interrupts.load(), 1);
  absl::StatusOr<std::unique_ptr<dist::BackendWork>> later = comm->Issue(DIST_COLL_BARRIER, Args());
  ASSERT_FALSE(later.ok());
  EXPECT_NE(later.status().message().find("rank 3 is gone"), std::string::npos);
  EXPECT_EQ(comm->Run(DIST_COLL_BARRIER, Args(), absl::Seconds(60)).code(),
            absl::StatusCode::kAborted);
}

TEST(RuntimeTest, TransportRevokeFailsLaterOperationsWithItsError) {
  auto record = std::make_shared<Record>();
  auto comm = Make(record);
  absl::Status failed = comm->Run(DIST_COLL_SEND, Args(1, 99), absl::Seconds(5));
  EXPECT_EQ(failed.code(), absl::StatusCode::kUnavailable);
  absl::Status later = comm->Run(DIST_COLL_BARRIER, Args(), absl::Seconds(5));
  EXPECT_EQ(later.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(later.message().find("peer 1 died"), std::string::npos) << later;
}

TEST(RuntimeTest, DestroyWithStuckWorkRevokesAfterTheTimeout) {
  auto record = std::make_shared<Record>();
  record->block = true;
  auto comm = Make(record, 200);
  dist_op_args_t long_op = Args();
  long_op.timeout_ms = 60000;
  auto work = *comm->Issue(DIST_COLL_ALL_REDUCE, long_op);
  const absl::Time start = absl::Now();
  comm.reset();
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
  // The handle outlives the communicator.
  bool done = false;
  absl::Status status = work->Test(&done);
  EXPECT_TRUE(done);
  EXPECT_EQ(status.code(), absl::StatusCode::kAborted);
  EXPECT_NE(status.message().find("destroyed with work still pending"), std::string::npos);
}

TEST(RuntimeTest, CallbacksRunOnceWithTheStatus) {
  dist::Completion completion;
  int calls = 0;
  absl::Status seen;
  completion.OnDone([&](const absl::Status& s) {
    ++calls;
    seen = s;
  });
  EXPECT_TRUE(completion.Complete(absl::DataLossError("x")));
  EXPECT_FALSE(completion.Complete(absl::OkStatus()));
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(seen.code(), absl::StatusCode::kDataLoss);
  completion.OnDone([&](const absl::Status& s) {  // after completion: at once
    ++calls;
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  });
  EXPECT_EQ(calls, 2);
}

TEST(RuntimeTest, ManyThreadsIssueConcurrentlyAndEveryOperationRunsOnce) {
  auto record = std::make_shared<Record>();
  auto comm = Make(record);
  constexpr int kThreads = 4, kEach = 200;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        if (i % 2 == 0) {
          EXPECT_TRUE(comm->Run(DIST_COLL_ALL_REDUCE, Args(), absl::Seconds(10)).ok());
        } else {
          auto work = *comm->Issue(DIST_COLL_SEND, Args(1, t));
          EXPECT_TRUE(work->Wait(absl::Seconds(10)).ok());
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  absl::MutexLock lock(&record->mu);
  ASSERT_EQ(record->ran.size(), static_cast<size_t>(kThreads * kEach));
  // Collectives numbered 0..n-1 in the order they ran; each tag's sends too.
  uint64_t next_collective = 0;
  std::vector<uint64_t> next_send(kThreads, 0);
  for (const Ran& ran : record->ran) {
    if (ran.kind == DIST_COLL_SEND) {
      EXPECT_EQ(ran.seq, next_send[ran.tag]++);
    } else {
      EXPECT_EQ(ran.seq, next_collective++);
    }
  }
}

}  // namespace
