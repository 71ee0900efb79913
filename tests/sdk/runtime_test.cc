// The SDK runtime (dist/cpp/runtime.hpp) with a transport that records what
// it is asked to run: issue order and numbering, where operations run,
// bounded waits, revoke and abort, destroy with work pending, callbacks;
// and with a transport that leaves operations in flight (in_flight.hpp).
#include "dist/cpp/runtime.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <optional>
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
  std::atomic<bool> fast_barriers{false};  // RunNow takes barriers
  std::atomic<int> ran_now{0};             // barriers run through RunNow
  int split_after ABSL_GUARDED_BY(mu) = -1;
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

  // The blocking fast path for barriers only (tag 3 declines it), counted.
  std::optional<absl::Status> RunNow(const dist::Op& op, dist::OpContext&) override {
    if (!record_->fast_barriers || op.kind != DIST_COLL_BARRIER || op.args.tag == 3) {
      return std::nullopt;
    }
    record_->ran_now++;
    return absl::OkStatus();
  }

  // Records how many operations had run when it ran.
  absl::StatusOr<std::unique_ptr<dist::Transport>> Split(const int32_t*, size_t,
                                                         const dist_comm_config_t&) override {
    absl::MutexLock lock(&record_->mu);
    record_->split_after = static_cast<int>(record_->ran.size());
    return std::unique_ptr<dist::Transport>(new RecordingTransport(record_));
  }

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

// Whether `count` operations have started within a few seconds.
bool RanAtLeast(Record& record, size_t count) {
  for (int i = 0; i < 5000; ++i) {
    {
      absl::MutexLock lock(&record.mu);
      if (record.ran.size() >= count) return true;
    }
    absl::SleepFor(absl::Milliseconds(1));
  }
  return false;
}

TEST(RuntimeTest, ABlockingCallOnAnIdleCommunicatorTakesTheFastPath) {
  auto record = std::make_shared<Record>();
  record->fast_barriers = true;
  auto comm = Make(record);
  ASSERT_TRUE(comm->Run(DIST_COLL_BARRIER, Args(), absl::Seconds(5)).ok());
  EXPECT_EQ(record->ran_now.load(), 1);
  // Declined: Execute runs it, numbered after the one RunNow ran.
  ASSERT_TRUE(comm->Run(DIST_COLL_BARRIER, Args(1, 3), absl::Seconds(5)).ok());
  // A waiter willing to wait less than the operation may take: no fast path.
  ASSERT_TRUE(comm->Run(DIST_COLL_BARRIER, Args(), absl::Seconds(1)).ok());
  // Busy (an asynchronous operation runs on the worker): no fast path.
  record->block = true;
  auto running = *comm->Issue(DIST_COLL_ALL_REDUCE, Args());
  ASSERT_TRUE(RanAtLeast(*record, 3));
  std::thread releaser([&] {
    absl::SleepFor(absl::Milliseconds(30));
    record->release.Notify();
  });
  ASSERT_TRUE(comm->Run(DIST_COLL_BARRIER, Args(), absl::Seconds(5)).ok());
  releaser.join();
  EXPECT_TRUE(running->Wait(absl::Seconds(5)).ok());
  EXPECT_EQ(record->ran_now.load(), 1);
  absl::MutexLock lock(&record->mu);
  ASSERT_EQ(record->ran.size(), 4u);
  EXPECT_EQ(record->ran[0].seq, 1u);  // after the fast one, numbered 0
  EXPECT_EQ(record->ran[3].kind, DIST_COLL_BARRIER);
  EXPECT_EQ(record->ran[3].seq, 4u);
}

TEST(RuntimeTest, SendRecvRunsBothInIssueOrderNumberedPerPeerAndTag) {
  auto record = std::make_shared<Record>();
  auto comm = Make(record);
  for (int round = 0; round < 3; ++round) {
    ASSERT_TRUE(comm->RunSendRecv(Args(1, 4), Args(1, 4), absl::Seconds(5)).ok());
  }
  absl::MutexLock lock(&record->mu);
  ASSERT_EQ(record->ran.size(), 6u);
  for (int round = 0; round < 3; ++round) {
    // Rank 0 sends to a higher rank first (SendRecvSendsFirst).
    EXPECT_EQ(record->ran[2 * round].kind, DIST_COLL_SEND);
    EXPECT_EQ(record->ran[2 * round + 1].kind, DIST_COLL_RECV);
    EXPECT_EQ(record->ran[2 * round].seq, static_cast<uint64_t>(round));
    EXPECT_EQ(record->ran[2 * round + 1].seq, static_cast<uint64_t>(round));
  }
}

TEST(RuntimeTest, SplitRunsAfterTheOperationsIssuedBeforeIt) {
  auto record = std::make_shared<Record>();
  auto comm = Make(record);
  record->block = true;
  auto first = *comm->Issue(DIST_COLL_ALL_REDUCE, Args());
  auto second = *comm->Issue(DIST_COLL_BARRIER, Args());  // queued behind it
  std::thread releaser([&] {
    absl::SleepFor(absl::Milliseconds(50));
    record->release.Notify();
  });
  dist_comm_config_t child = Config();
  child.group_name = "child";
  const int32_t ranks[2] = {0, 1};
  absl::StatusOr<std::unique_ptr<dist::BackendComm>> made = comm->Split(ranks, 2, child);
  releaser.join();
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_TRUE(*made != nullptr);
  EXPECT_TRUE(first->Wait(absl::Seconds(5)).ok());
  EXPECT_TRUE(second->Wait(absl::Seconds(5)).ok());
  absl::MutexLock lock(&record->mu);
  EXPECT_EQ(record->split_after, 2);
}

TEST(RuntimeTest, SplitThatCannotStartWithinTheTimeoutIsWithdrawn) {
  auto record = std::make_shared<Record>();
  auto comm = Make(record, /*timeout_ms=*/100);
  record->block = true;
  dist_op_args_t patient = Args();
  patient.timeout_ms = 5000;
  auto stuck = *comm->Issue(DIST_COLL_ALL_REDUCE, patient);
  const int32_t ranks[2] = {0, 1};
  absl::StatusOr<std::unique_ptr<dist::BackendComm>> made = comm->Split(ranks, 2, Config());
  EXPECT_EQ(made.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(made.status().message().find("could not start"), std::string::npos);
  record->release.Notify();
  EXPECT_TRUE(stuck->Wait(absl::Seconds(5)).ok());
  absl::SleepFor(absl::Milliseconds(20));
  absl::MutexLock lock(&record->mu);
  EXPECT_EQ(record->split_after, -1);  // never ran
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

// A transport whose operations stay in flight until the test (or, with
// finish_on_drive, a waiter's Drive) finishes them: a library that only
// progresses when driven.
struct Flights {
  absl::Mutex mu;
  std::vector<dist::Op> ops ABSL_GUARDED_BY(mu);  // in start order
  std::vector<dist::Transport::Finish> finishes ABSL_GUARDED_BY(mu);
  std::vector<uint64_t> recv_counts ABSL_GUARDED_BY(mu);  // of the last variable-count op
  std::atomic<bool> finish_on_drive{false};
  std::atomic<int> drives{0};
  std::atomic<int> interrupts{0};

  size_t started() {
    absl::MutexLock lock(&mu);
    return ops.size();
  }
  void Finish(size_t index, const absl::Status& status) {
    dist::Transport::Finish finish;
    {
      absl::MutexLock lock(&mu);
      finish = finishes.at(index);
    }
    finish(status);
  }
};

class TestFlight : public dist::InFlight {
 public:
  TestFlight(std::shared_ptr<Flights> flights, size_t index)
      : flights_(std::move(flights)), index_(index) {}
  void Drive(absl::Time until) override {
    flights_->drives++;
    if (flights_->finish_on_drive.load()) {
      flights_->Finish(index_, absl::OkStatus());
      return;
    }
    absl::SleepFor(
        std::max(std::min(until - absl::Now(), absl::Milliseconds(1)), absl::ZeroDuration()));
  }
  absl::Status Overdue() override {
    return absl::DeadlineExceededError("flight: rank 1 never answered");
  }

 private:
  std::shared_ptr<Flights> flights_;
  size_t index_;
};

class FlightTransport : public dist::Transport {
 public:
  explicit FlightTransport(std::shared_ptr<Flights> flights) : flights_(std::move(flights)) {}
  bool StartsAtOnce(dist_collective_t) const override { return true; }
  bool RunsVariableCounts(dist_collective_t) const override { return true; }
  absl::StatusOr<std::unique_ptr<dist::InFlight>> Start(const dist::Op& op, dist::OpContext&,
                                                        Finish finish) override {
    if (op.args.tag == 13) return absl::InvalidArgumentError("flight: tag 13 is refused");
    size_t index;
    {
      absl::MutexLock lock(&flights_->mu);
      index = flights_->ops.size();
      flights_->ops.push_back(op);
      flights_->finishes.push_back(finish);
      if (op.counts != nullptr) {
        flights_->recv_counts.assign(op.counts->recv_counts, op.counts->recv_counts + 2);
      }
    }
    if (op.args.tag == 5) finish(absl::OkStatus());  // done before Start returns
    return std::unique_ptr<dist::InFlight>(new TestFlight(flights_, index));
  }
  void Interrupt(const absl::Status&) override { flights_->interrupts++; }

 private:
  std::shared_ptr<Flights> flights_;
};

std::unique_ptr<dist::BackendComm> MakeFlying(const std::shared_ptr<Flights>& flights,
                                              int64_t timeout_ms = 5000) {
  return *dist::MakeRuntimeComm(Config(timeout_ms), std::make_unique<FlightTransport>(flights));
}

dist_op_args_t WithBuffers(void* send, void* recv, uint64_t count, int64_t tag = 0) {
  dist_op_args_t args = Args(1, tag);
  args.send = dist_buffer_t{};
  args.send.data = send;
  args.send.count = send != nullptr ? count : 0;
  args.send.dtype = DIST_FLOAT32;
  args.recv = dist_buffer_t{};
  args.recv.data = recv;
  args.recv.count = recv != nullptr ? count : 0;
  args.recv.dtype = DIST_FLOAT32;
  return args;
}

bool Done(dist::BackendWork& work) {
  bool done = false;
  work.Test(&done).IgnoreError();
  return done;
}

TEST(RuntimeInFlightTest, LaterOperationsStartOnTheCallersThreadWhileEarlierOnesFly) {
  auto flights = std::make_shared<Flights>();
  auto comm = MakeFlying(flights);
  float a[4], b[4], c[4], d[4];
  auto first = *comm->Issue(DIST_COLL_ALL_REDUCE, WithBuffers(a, b, 4));
  auto second = *comm->Issue(DIST_COLL_ALL_REDUCE, WithBuffers(c, d, 4));
  ASSERT_EQ(flights->started(), 2u);  // both started inside Issue, neither done
  EXPECT_FALSE(Done(*first));
  EXPECT_FALSE(Done(*second));
  {
    absl::MutexLock lock(&flights->mu);
    EXPECT_EQ(flights->ops[0].seq, 0u);
    EXPECT_EQ(flights->ops[1].seq, 1u);
  }
  flights->Finish(1, absl::DataLossError("flight: second failed"));
  EXPECT_EQ(second->Wait(absl::Seconds(1)).code(), absl::StatusCode::kDataLoss);
  EXPECT_FALSE(Done(*first));  // each ends on its own
  flights->Finish(0, absl::OkStatus());
  EXPECT_TRUE(first->Wait(absl::Seconds(1)).ok());
}

TEST(RuntimeInFlightTest, AnOperationThatSharesABufferStartsAfterTheOneInFlight) {
  auto flights = std::make_shared<Flights>();
  auto comm = MakeFlying(flights);
  float x[8], y[8], z[8];
  auto writes_y = *comm->Issue(DIST_COLL_ALL_REDUCE, WithBuffers(x, y, 8));
  auto reads_x = *comm->Issue(DIST_COLL_ALL_REDUCE, WithBuffers(x, z, 8));  // both only read x
  auto reads_y = *comm->Issue(DIST_COLL_ALL_REDUCE, WithBuffers(y + 4, z, 2));
  auto last = *comm->Issue(DIST_COLL_BARRIER, Args());  // behind it, in issue order
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(flights->started(), 2u);
  EXPECT_FALSE(Done(*reads_y));
  flights->Finish(0, absl::OkStatus());
  absl::SleepFor(absl::Milliseconds(50));
  ASSERT_EQ(flights->started(), 2u);  // reads_y waits for z too, which reads_x writes
  flights->Finish(1, absl::OkStatus());
  for (int i = 0; i < 2000 && flights->started() < 4; ++i) absl::SleepFor(absl::Milliseconds(1));
  ASSERT_EQ(flights->started(), 4u);
  {
    absl::MutexLock lock(&flights->mu);
    EXPECT_EQ(flights->ops[2].args.send.data, y + 4);
    EXPECT_EQ(flights->ops[3].kind, DIST_COLL_BARRIER);
  }
  flights->Finish(2, absl::OkStatus());
  flights->Finish(3, absl::OkStatus());
  for (auto* work : {writes_y.get(), reads_x.get(), reads_y.get(), last.get()}) {
    EXPECT_TRUE(work->Wait(absl::Seconds(1)).ok());
  }
}

TEST(RuntimeInFlightTest, WaitAndTestDriveTheOperation) {
  auto flights = std::make_shared<Flights>();
  flights->finish_on_drive = true;
  auto comm = MakeFlying(flights);
  auto waited = *comm->Issue(DIST_COLL_BARRIER, Args());
  EXPECT_TRUE(waited->Wait(absl::Seconds(5)).ok());
  auto tested = *comm->Issue(DIST_COLL_BARRIER, Args());
  EXPECT_TRUE(Done(*tested));  // one Test is one turn of Drive
  EXPECT_GE(flights->drives.load(), 2);
  // A blocking call starts it and drives it to its end on the caller's thread.
  EXPECT_TRUE(comm->Run(DIST_COLL_BARRIER, Args(), absl::Seconds(5)).ok());
  // Finished inside Start, refused by Start.
  EXPECT_TRUE(comm->Run(DIST_COLL_SEND, Args(1, 5), absl::Seconds(5)).ok());
  absl::StatusOr<std::unique_ptr<dist::BackendWork>> refused =
      comm->Issue(DIST_COLL_SEND, Args(1, 13));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("tag 13 is refused"), std::string::npos);
}

TEST(RuntimeInFlightTest, OverdueOperationReportsTheTransportsErrorAndStaysUntilRevoked) {
  auto flights = std::make_shared<Flights>();
  auto comm = MakeFlying(flights, 60000);
  dist_op_args_t args = Args();
  args.timeout_ms = 100;
  auto work = *comm->Issue(DIST_COLL_BARRIER, args);
  const absl::Time start = absl::Now();
  absl::Status overdue = work->Wait(absl::Milliseconds(300));  // waits it all, driving
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(290));
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
  EXPECT_EQ(overdue.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(overdue.message().find("rank 1 never answered"), std::string::npos) << overdue;
  EXPECT_FALSE(Done(*work));  // its buffers are still the library's
  absl::Status early = comm->Issue(DIST_COLL_BARRIER, Args()).value()->Wait(absl::Milliseconds(20));
  EXPECT_NE(early.message().find("still runs after waiting 20ms"), std::string::npos) << early;
  absl::Status blocking = comm->Run(DIST_COLL_ALL_REDUCE, args, absl::Seconds(10));
  EXPECT_NE(blocking.message().find("rank 1 never answered"), std::string::npos) << blocking;
  comm->Abort("rank 1 is gone");
  EXPECT_TRUE(Done(*work));
  EXPECT_EQ(work->Wait(absl::Seconds(1)).code(), absl::StatusCode::kAborted);
  EXPECT_EQ(flights->interrupts.load(), 1);
  flights->Finish(0, absl::OkStatus());  // the library ends it late: too late to count
  EXPECT_EQ(work->Wait(absl::Seconds(1)).code(), absl::StatusCode::kAborted);
}

TEST(RuntimeInFlightTest, DestroyWaitsForOperationsInFlightThenRevokes) {
  auto flights = std::make_shared<Flights>();
  auto comm = MakeFlying(flights, 200);
  auto work = *comm->Issue(DIST_COLL_BARRIER, Args());
  const absl::Time start = absl::Now();
  comm.reset();
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(150));
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
  absl::Status status = work->Wait(absl::Seconds(1));
  EXPECT_EQ(status.code(), absl::StatusCode::kAborted);
  EXPECT_NE(status.message().find("destroyed with work still pending"), std::string::npos);
  flights->Finish(0, absl::OkStatus());  // after the communicator: harmless
}

TEST(RuntimeInFlightTest, VariableCountsReachStartAndOutliveTheCall) {
  auto flights = std::make_shared<Flights>();
  flights->finish_on_drive = true;
  auto comm = MakeFlying(flights);
  float send[3], recv[3];
  uint64_t counts[2] = {1, 2}, displs[2] = {0, 1};
  dist_op_counts_t v{};
  v.struct_size = sizeof(v);
  v.send_counts = counts;
  v.send_displs = displs;
  v.recv_counts = counts;
  v.recv_displs = displs;
  EXPECT_TRUE(
      comm->RunVariable(DIST_COLL_ALL_TO_ALL, WithBuffers(send, recv, 3), v, absl::Seconds(5))
          .ok());
  // Behind an operation in flight that uses the buffers: queued, so copied.
  flights->finish_on_drive = false;
  auto ahead = *comm->Issue(DIST_COLL_ALL_REDUCE, WithBuffers(send, recv, 3));
  counts[1] = 7;
  std::thread finisher([&] {
    absl::SleepFor(absl::Milliseconds(30));
    flights->Finish(1, absl::OkStatus());
    for (int i = 0; i < 2000 && flights->started() < 3; ++i) absl::SleepFor(absl::Milliseconds(1));
    flights->Finish(2, absl::OkStatus());
  });
  EXPECT_TRUE(
      comm->RunVariable(DIST_COLL_ALL_TO_ALL, WithBuffers(send, recv, 3), v, absl::Seconds(5))
          .ok());
  finisher.join();
  absl::MutexLock lock(&flights->mu);
  EXPECT_EQ(flights->recv_counts, (std::vector<uint64_t>{1, 7}));
  EXPECT_TRUE(ahead != nullptr);
}

}  // namespace
