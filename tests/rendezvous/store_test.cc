// Store semantics, the same for the TCP store and the file store, checked
// through the C ABI (dist_store_t) that the core and backends use. Each
// test uses two independent handles (two TCP clients; two opens of the
// file) so that every write is observed through the other one.
#include "dist/cpp/store.hpp"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "plugins/store/abi_store.h"
#include "plugins/store/file_store.h"
#include "plugins/store/protocol.h"
#include "plugins/store/tcp_store_client.h"
#include "plugins/store/tcp_store_server.h"
#include "tests/rendezvous/test_support.h"

namespace dist::store {
namespace {

using ::dist::StoreView;

constexpr absl::Duration kDefaultTimeout = absl::Seconds(5);

class StoreTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "tcp") {
      TcpStoreServerOptions options;
      options.bind_host = "127.0.0.1";
      auto server = TcpStoreServer::Start(options);
      ASSERT_TRUE(server.ok()) << server.status();
      server_ = std::move(*server);
    } else {
      path_ = testing::TempPath("store_test");
    }
    a_ = Open();
    b_ = Open();
    ASSERT_NE(a_, nullptr);
    ASSERT_NE(b_, nullptr);
  }
  void TearDown() override {
    if (a_) a_->release(a_->ctx);
    if (b_) b_->release(b_->ctx);
    server_.reset();
  }

  dist_store_t* Open() {
    std::unique_ptr<Store> store;
    if (GetParam() == "tcp") {
      TcpStoreClientOptions options;
      options.host = "127.0.0.1";
      options.port = server_->port();
      options.timeout = kDefaultTimeout;
      auto client = TcpStoreClient::Connect(options);
      EXPECT_TRUE(client.ok()) << client.status();
      if (!client.ok()) return nullptr;
      store = std::move(*client);
    } else {
      FileStoreOptions options;
      options.path = path_;
      options.timeout = kDefaultTimeout;
      auto file = FileStore::Open(options);
      EXPECT_TRUE(file.ok()) << file.status();
      if (!file.ok()) return nullptr;
      store = std::move(*file);
    }
    return MakeAbiStore(std::move(store), kDefaultTimeout);
  }

  std::unique_ptr<TcpStoreServer> server_;
  std::string path_;
  dist_store_t* a_ = nullptr;
  dist_store_t* b_ = nullptr;
};

TEST_P(StoreTest, SetThenGetFromAnotherHandleAndOverwrite) {
  StoreView a(a_), b(b_);
  ASSERT_TRUE(a.Set("k", "v1").ok());
  EXPECT_EQ(b.Get("k", absl::Seconds(1)).value(), "v1");
  ASSERT_TRUE(b.Set("k", "second value").ok());
  EXPECT_EQ(a.Get("k", absl::Seconds(1)).value(), "second value");
}

TEST_P(StoreTest, BinaryAndEmptyValuesRoundTrip) {
  StoreView a(a_), b(b_);
  const std::string binary("\0\x01\xff\0zz", 6);
  ASSERT_TRUE(a.Set("bin", binary).ok());
  EXPECT_EQ(b.Get("bin", absl::Seconds(1)).value(), binary);
  ASSERT_TRUE(a.Set("empty", "").ok());
  EXPECT_EQ(b.Get("empty", absl::Seconds(1)).value(), "");
  // A 3 MiB value crosses many socket reads and file pages.
  std::string big(3 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7 + (i >> 11));
  ASSERT_TRUE(a.Set("big", big).ok());
  EXPECT_EQ(b.Get("big", absl::Seconds(5)).value(), big);
}

TEST_P(StoreTest, GetTimesOutNamingTheKeyWithinBound) {
  StoreView a(a_);
  const absl::Time start = absl::Now();
  absl::StatusOr<std::string> got = a.Get("never/set", absl::Milliseconds(300));
  const absl::Duration elapsed = absl::Now() - start;
  ASSERT_EQ(got.status().code(), absl::StatusCode::kDeadlineExceeded) << got.status();
  EXPECT_TRUE(absl::StrContains(got.status().message(), "never/set")) << got.status();
  EXPECT_GE(elapsed, absl::Milliseconds(290));
  EXPECT_LT(elapsed, absl::Seconds(3));
}

TEST_P(StoreTest, GetWaitsForALaterSet) {
  StoreView a(a_), b(b_);
  std::thread setter([&] {
    absl::SleepFor(absl::Milliseconds(200));
    EXPECT_TRUE(b.Set("later", "arrived").ok());
  });
  const absl::Time start = absl::Now();
  absl::StatusOr<std::string> got = a.Get("later", absl::Seconds(5));
  setter.join();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "arrived");
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(150));
}

TEST_P(StoreTest, NegativeTimeoutUsesTheStoreDefault) {
  void* value = nullptr;
  size_t size = 0;
  ASSERT_TRUE(StoreView(b_).Set("present", "x").ok());
  dist_error_t* error = a_->get(a_->ctx, "present", -1, &value, &size);
  ASSERT_EQ(error, nullptr) << dist_error_message(error);
  EXPECT_EQ(std::string(static_cast<char*>(value), size), "x");
  a_->free_value(a_->ctx, value);
  a_->free_value(a_->ctx, nullptr);  // a no-op
}

TEST_P(StoreTest, AddCountsFromZeroAndRejectsNonIntegers) {
  StoreView a(a_), b(b_);
  EXPECT_EQ(a.Add("n", 5).value(), 5);
  EXPECT_EQ(b.Add("n", -7).value(), -2);
  EXPECT_EQ(a.Add("n", 0).value(), -2);
  EXPECT_EQ(b.Get("n", absl::Seconds(1)).value(), "-2");
  ASSERT_TRUE(a.Set("text", "hello").ok());
  absl::StatusOr<int64_t> bad = b.Add("text", 1);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "text")) << bad.status();
}

TEST_P(StoreTest, AddFromManyThreadsIsAtomic) {
  constexpr int kThreads = 8, kAdds = 100;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      StoreView view(t % 2 ? a_ : b_);
      for (int i = 0; i < kAdds; ++i) ASSERT_TRUE(view.Add("shared", 1).ok());
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(StoreView(a_).Get("shared", absl::Seconds(1)).value(),
            std::to_string(kThreads * kAdds));
}

TEST_P(StoreTest, CompareSetSemantics) {
  StoreView a(a_), b(b_);
  // Missing key, expected "missing" (NULL): swaps.
  EXPECT_EQ(a.CompareSet("cas", "", "first").value(), "first");
  // Missing expected but the key exists: no swap, returns the current value.
  EXPECT_EQ(b.CompareSet("cas", "", "other").value(), "first");
  // Wrong expected: no swap.
  EXPECT_EQ(b.CompareSet("cas", "wrong", "other").value(), "first");
  // Right expected: swaps.
  EXPECT_EQ(b.CompareSet("cas", "first", "second").value(), "second");
  EXPECT_EQ(a.Get("cas", absl::Seconds(1)).value(), "second");
  // Expected an empty value (non-NULL, size 0) on a missing key: no swap.
  void* actual = nullptr;
  size_t size = 99;
  dist_error_t* error = a_->compare_set(a_->ctx, "cas-empty", "", 0, "v", 1, &actual, &size);
  ASSERT_EQ(error, nullptr) << dist_error_message(error);
  EXPECT_EQ(size, 0u);
  a_->free_value(a_->ctx, actual);
  EXPECT_FALSE(a.Check({"cas-empty"}).value());
}

TEST_P(StoreTest, CompareSetWakesAWaiter) {
  StoreView a(a_), b(b_);
  std::thread setter([&] {
    absl::SleepFor(absl::Milliseconds(100));
    EXPECT_EQ(b.CompareSet("leader", "", "rank 3").value(), "rank 3");
  });
  EXPECT_EQ(a.Get("leader", absl::Seconds(5)).value(), "rank 3");
  setter.join();
}

TEST_P(StoreTest, RemoveReportsWhetherTheKeyExisted) {
  StoreView a(a_), b(b_);
  ASSERT_TRUE(a.Set("gone", "x").ok());
  EXPECT_TRUE(b.Remove("gone").value());
  EXPECT_FALSE(a.Remove("gone").value());
  EXPECT_FALSE(a.Check({"gone"}).value());
  int existed = 7;
  ASSERT_EQ(a_->remove(a_->ctx, "gone", &existed), nullptr);
  EXPECT_EQ(existed, 0);
  ASSERT_EQ(a_->remove(a_->ctx, "gone", nullptr), nullptr);  // NULL is allowed
}

TEST_P(StoreTest, CheckDoesNotWait) {
  StoreView a(a_), b(b_);
  ASSERT_TRUE(a.Set("x", "1").ok());
  const absl::Time start = absl::Now();
  EXPECT_TRUE(b.Check({"x"}).value());
  EXPECT_FALSE(b.Check({"x", "y"}).value());
  EXPECT_TRUE(b.Check({}).value());
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
}

TEST_P(StoreTest, WaitTimesOutNamingOnlyTheMissingKeys) {
  StoreView a(a_), b(b_);
  ASSERT_TRUE(a.Set("here", "1").ok());
  const absl::Time start = absl::Now();
  absl::Status waited = b.Wait({"here", "missing-1", "missing-2"}, absl::Milliseconds(300));
  const absl::Duration elapsed = absl::Now() - start;
  ASSERT_EQ(waited.code(), absl::StatusCode::kDeadlineExceeded) << waited;
  EXPECT_TRUE(absl::StrContains(waited.message(), "missing-1")) << waited;
  EXPECT_TRUE(absl::StrContains(waited.message(), "missing-2")) << waited;
  EXPECT_FALSE(absl::StrContains(waited.message(), "'here'")) << waited;
  EXPECT_GE(elapsed, absl::Milliseconds(290));
  EXPECT_LT(elapsed, absl::Seconds(3));
}

TEST_P(StoreTest, WaitReturnsWhenTheLastKeyAppears) {
  StoreView a(a_), b(b_);
  std::thread setter([&] {
    for (int i = 0; i < 3; ++i) {
      absl::SleepFor(absl::Milliseconds(50));
      EXPECT_TRUE(b.Set(absl::StrCat("w", i), "x").ok());
    }
  });
  EXPECT_TRUE(a.Wait({"w0", "w1", "w2", "w1"}, absl::Seconds(5)).ok());
  setter.join();
}

TEST_P(StoreTest, NumKeysCountsEveryKey) {
  StoreView a(a_), b(b_);
  EXPECT_EQ(a.NumKeys().value(), 0);
  ASSERT_TRUE(a.Set("p/1", "x").ok());
  ASSERT_TRUE(b.Set("q/2", "y").ok());
  ASSERT_TRUE(b.Add("c", 1).ok());
  EXPECT_EQ(a.NumKeys().value(), 3);
  ASSERT_TRUE(a.Remove("c").ok());
  EXPECT_EQ(b.NumKeys().value(), 2);
}

TEST_P(StoreTest, SizeLimitsAreEnforced) {
  StoreView a(a_);
  const std::string long_key(DIST_STORE_MAX_KEY_BYTES + 1, 'k');
  EXPECT_EQ(a.Set(long_key, "v").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(a.Get(long_key, absl::Seconds(1)).status().code(), absl::StatusCode::kInvalidArgument);
  const std::string max_key(DIST_STORE_MAX_KEY_BYTES, 'k');
  ASSERT_TRUE(a.Set(max_key, "v").ok());
  EXPECT_EQ(StoreView(b_).Get(max_key, absl::Seconds(1)).value(), "v");
  EXPECT_EQ(a.Set("", "v").code(), absl::StatusCode::kInvalidArgument);
  // One byte over the value limit, without allocating 64 MiB: the size is
  // checked before the data is touched.
  static const char byte = 'x';
  dist_error_t* error = a_->set(a_->ctx, "huge", &byte, DIST_STORE_MAX_VALUE_BYTES + 1ull);
  ASSERT_NE(error, nullptr);
  EXPECT_EQ(dist_error_code(error), DIST_INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(dist_error_message(error), "DIST_STORE_MAX_VALUE_BYTES"));
  dist_error_destroy(error);
}

TEST_P(StoreTest, NullArgumentsAreErrorsNotCrashes) {
  dist_error_t* error = a_->set(a_->ctx, nullptr, "v", 1);
  EXPECT_EQ(dist_error_code(error), DIST_INVALID_ARGUMENT);
  dist_error_destroy(error);
  error = a_->get(a_->ctx, "k", 0, nullptr, nullptr);
  EXPECT_EQ(dist_error_code(error), DIST_INVALID_ARGUMENT);
  dist_error_destroy(error);
  const char* keys[] = {"a", nullptr};
  error = a_->wait(a_->ctx, keys, 2, 10);
  EXPECT_EQ(dist_error_code(error), DIST_INVALID_ARGUMENT);
  dist_error_destroy(error);
}

TEST(FileStoreLog, TornRecordFromACrashedWriterIsCutOff) {
  const std::string path = testing::TempPath("torn");
  FileStoreOptions options;
  options.path = path;
  auto first = FileStore::Open(options);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE((*first)->Set("before", "crash").ok());
  {
    // What a writer killed mid-append leaves: a length promising 100
    // bytes, and only 3 of them.
    std::ofstream file(path, std::ios::app | std::ios::binary);
    file.write(
        "\x64\x00\x00\x00\x02"
        "ab",
        7);
  }
  auto second = FileStore::Open(options);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ((*second)->Get("before", absl::Seconds(1)).value(), "crash");
  ASSERT_TRUE((*second)->Set("after", "recovered").ok());
  EXPECT_EQ((*first)->Get("after", absl::Seconds(1)).value(), "recovered");
  EXPECT_EQ((*first)->NumKeys().value(), 2);
}

TEST(FileStoreLog, CorruptRecordIsReportedNamingTheFile) {
  const std::string path = testing::TempPath("corrupt");
  FileStoreOptions options;
  options.path = path;
  auto store = FileStore::Open(options);
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->Set("k", "v").ok());
  {
    std::ofstream file(path, std::ios::app | std::ios::binary);
    file.write("\x02\x00\x00\x00\x63\x63", 6);  // a complete record of unknown type
  }
  auto other = FileStore::Open(options);
  ASSERT_TRUE(other.ok());
  absl::StatusOr<int64_t> count = (*other)->NumKeys();
  EXPECT_EQ(count.status().code(), absl::StatusCode::kDataLoss) << count.status();
  EXPECT_TRUE(absl::StrContains(count.status().message(), path)) << count.status();
}

// ---- a failed rendezvous is kept in the file --------------------------------

FileStoreOptions Member(const std::string& path, int rank, int world_size) {
  FileStoreOptions options;
  options.path = path;
  options.rank = rank;
  options.world_size = world_size;
  options.timeout = absl::Seconds(5);
  return options;
}

// The rendezvous member `rank` of a file store, as a plugin hands it out.
dist_store_t* OpenMember(const std::string& path, int rank, int world_size) {
  auto store = FileStore::Open(Member(path, rank, world_size));
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? MakeAbiStore(*std::move(store), absl::Seconds(5)) : nullptr;
}

TEST(FileStoreFailure, ARankOpeningTheFileAfterAFailureIsToldTheReasonAtOnce) {
  const std::string path = testing::TempPath("failed");
  dist_store_t* rank0 = OpenMember(path, 0, 2);
  ASSERT_NE(rank0, nullptr);
  ASSERT_GE(rank0->struct_size, offsetof(dist_store_t, release_failed) + sizeof(void*));
  ASSERT_NE(rank0->release_failed, nullptr);
  rank0->release_failed(rank0->ctx, "the join of rank 0 failed: reason 42");
  const absl::Time start = absl::Now();
  auto late = FileStore::Open(Member(path, 1, 2));
  ASSERT_FALSE(late.ok());
  EXPECT_LT(absl::Now() - start, absl::Seconds(2)) << "told at once, not at the timeout";
  EXPECT_EQ(late.status().code(), absl::StatusCode::kFailedPrecondition) << late.status();
  const std::string message(late.status().message());
  EXPECT_TRUE(absl::StrContains(
      message, absl::StrCat("file://", path,
                            ": the rendezvous in it already failed: the join of rank 0 failed: "
                            "reason 42 (reported by rank 0 on ")))
      << message;
  EXPECT_TRUE(absl::StrContains(message, "delete the file")) << message;
  EXPECT_FALSE(absl::StrContains(message, "earlier job")) << message;
}

// Without a failure the same file is stale for the old reason: a plain
// release says nothing about failing.
TEST(FileStoreFailure, APlainReleaseRecordsNoFailure) {
  const std::string path = testing::TempPath("released");
  dist_store_t* rank0 = OpenMember(path, 0, 2);
  ASSERT_NE(rank0, nullptr);
  rank0->release(rank0->ctx);
  auto late = FileStore::Open(Member(path, 1, 2));
  ASSERT_FALSE(late.ok());
  EXPECT_TRUE(absl::StrContains(late.status().message(), "ranks of an earlier job already left it"))
      << late.status();
  EXPECT_FALSE(absl::StrContains(late.status().message(), "already failed")) << late.status();
}

TEST(FileStoreFailure, TheFirstFailureIsTheOneReported) {
  const std::string path = testing::TempPath("first");
  dist_store_t* rank0 = OpenMember(path, 0, 3);
  dist_store_t* rank1 = OpenMember(path, 1, 3);
  ASSERT_NE(rank0, nullptr);
  ASSERT_NE(rank1, nullptr);
  rank1->release_failed(rank1->ctx, "first cause");
  rank0->release_failed(rank0->ctx, "a later echo");
  auto late = FileStore::Open(Member(path, 2, 3));
  ASSERT_FALSE(late.ok());
  EXPECT_TRUE(absl::StrContains(late.status().message(),
                                "already failed: first cause (reported by rank 1 on "))
      << late.status();
  EXPECT_FALSE(absl::StrContains(late.status().message(), "a later echo")) << late.status();
}

// A header record as the given file format version writes it.
std::string HeaderRecord(uint16_t version, int world_size) {
  protocol::Writer header;
  header.U8(1);            // header
  header.U32(0x53465344);  // "DSFS"
  header.U16(version);
  header.I64(world_size);
  header.I64(absl::ToUnixMillis(absl::Now()));
  header.Str("otherhost:1");
  return std::move(header).Finish();
}

// A version 1 file (from the previous release) is still joined; ranks of
// that release could not read a failed record, so none is written and a
// late rank hears the version 1 reason.
TEST(FileStoreFailure, AVersionOneFileIsJoinedAndGetsNoFailedRecord) {
  const std::string path = testing::TempPath("v1");
  std::ofstream(path, std::ios::binary) << HeaderRecord(1, 2);
  dist_store_t* rank0 = OpenMember(path, 0, 2);
  ASSERT_NE(rank0, nullptr);
  const dist::StoreView view(rank0);
  ASSERT_TRUE(view.Set("k", "v").ok());
  rank0->release_failed(rank0->ctx, "must not be written");
  std::ifstream file(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  EXPECT_FALSE(absl::StrContains(bytes, "must not be written"));
  auto late = FileStore::Open(Member(path, 1, 2));
  ASSERT_FALSE(late.ok());
  EXPECT_TRUE(absl::StrContains(late.status().message(), "ranks of an earlier job already left it"))
      << late.status();
}

TEST(FileStoreFailure, AFileOfANewerFormatIsRefusedNamingBothVersions) {
  const std::string path = testing::TempPath("v3");
  std::ofstream(path, std::ios::binary) << HeaderRecord(3, 2);
  auto store = FileStore::Open(Member(path, 0, 2));
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition) << store.status();
  EXPECT_TRUE(absl::StrContains(store.status().message(),
                                "has format version 3 but this build reads versions 1 to 2"))
      << store.status();
}

// ---- the file store never harms a file it did not create ------------------

std::string ReadAll(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
}

// The file of the issue: 2 KiB of binary whose first four bytes read as a
// plausible record length (65,536), which used to get it truncated.
std::string ForeignBinary() {
  std::string bytes(2048, '\0');
  bytes[2] = 1;
  for (size_t i = 4; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 7 + 3);
  return bytes;
}

void ExpectRefusedUntouched(const absl::Status& status, const std::string& path) {
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), path)) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "left it untouched")) << status;
  EXPECT_FALSE(absl::StrContains(status.message(), "delete")) << status;
  EXPECT_FALSE(absl::StrContains(status.message(), "remove")) << status;
}

class FileStoreSafety : public ::testing::TestWithParam<int> {
 protected:
  // 0: a plain store; 2: a rendezvous member (rank 0 of 2).
  FileStoreOptions Options(const std::string& path) {
    FileStoreOptions options = Member(path, 0, GetParam());
    options.timeout = absl::Seconds(3);
    return options;
  }
};

TEST_P(FileStoreSafety, AForeignFileStaysByteIdentical) {
  const std::string path = testing::TempPath("foreign");
  const std::string original = ForeignBinary();
  std::ofstream(path, std::ios::binary) << original;
  auto store = FileStore::Open(Options(path));
  ASSERT_FALSE(store.ok());
  ExpectRefusedUntouched(store.status(), path);
  EXPECT_TRUE(absl::StrContains(store.status().message(), "not a dist rendezvous file"))
      << store.status();
  EXPECT_EQ(ReadAll(path), original);
}

TEST_P(FileStoreSafety, ASymlinkAndItsTargetStayAsTheyWere) {
  const std::string target = testing::TempPath("target");
  const std::string link = testing::TempPath("link");
  const std::string original = ForeignBinary();
  std::ofstream(target, std::ios::binary) << original;
  ASSERT_EQ(symlink(target.c_str(), link.c_str()), 0);
  auto store = FileStore::Open(Options(link));
  ASSERT_FALSE(store.ok());
  ExpectRefusedUntouched(store.status(), link);
  EXPECT_TRUE(absl::StrContains(store.status().message(), "symbolic link")) << store.status();
  EXPECT_EQ(ReadAll(target), original);
  struct stat info;
  ASSERT_EQ(lstat(link.c_str(), &info), 0);
  EXPECT_TRUE(S_ISLNK(info.st_mode));
}

TEST_P(FileStoreSafety, ASymlinkToANonexistentFileCreatesNothing) {
  const std::string target = testing::TempPath("dangling_target");
  const std::string link = testing::TempPath("dangling");
  ASSERT_EQ(symlink(target.c_str(), link.c_str()), 0);
  auto store = FileStore::Open(Options(link));
  ASSERT_FALSE(store.ok());
  ExpectRefusedUntouched(store.status(), link);
  struct stat info;
  EXPECT_NE(stat(target.c_str(), &info), 0) << "the link's target was created";
}

TEST_P(FileStoreSafety, AnEmptyFileAndAFifoAreRefused) {
  const std::string empty = testing::TempPath("empty");
  std::ofstream(empty).flush();
  auto store = FileStore::Open(Options(empty));
  ASSERT_FALSE(store.ok());
  ExpectRefusedUntouched(store.status(), empty);
  EXPECT_EQ(ReadAll(empty), "");
  const std::string fifo = testing::TempPath("fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  auto piped = FileStore::Open(Options(fifo));
  ASSERT_FALSE(piped.ok());
  ExpectRefusedUntouched(piped.status(), fifo);
  EXPECT_TRUE(absl::StrContains(piped.status().message(), "not a regular file")) << piped.status();
}

TEST_P(FileStoreSafety, AFileWithAShortTextIsRefused) {
  const std::string path = testing::TempPath("text");
  std::ofstream(path) << "hi";
  auto store = FileStore::Open(Options(path));
  ASSERT_FALSE(store.ok());
  ExpectRefusedUntouched(store.status(), path);
  EXPECT_EQ(ReadAll(path), "hi");
}

INSTANTIATE_TEST_SUITE_P(Modes, FileStoreSafety, ::testing::Values(0, 2),
                         [](const auto& info) { return info.param == 0 ? "plain" : "member"; });

TEST(FileStoreSafetyRoot, AnotherUsersFileIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to make a file of another user";
  const std::string path = testing::TempPath("others");
  std::ofstream(path, std::ios::binary) << HeaderRecord(2, 2);
  const std::string original = ReadAll(path);
  ASSERT_EQ(chown(path.c_str(), 65534, 65534), 0);
  auto store = FileStore::Open(Member(path, 0, 2));
  ASSERT_FALSE(store.ok());
  ExpectRefusedUntouched(store.status(), path);
  EXPECT_TRUE(absl::StrContains(store.status().message(), "belongs to user ID 65534"))
      << store.status();
  EXPECT_EQ(ReadAll(path), original);
}

// Ranks racing to create the file: exactly one creates it, all join it, and
// no temporary file is left in the directory.
TEST(FileStoreCreation, RacingRanksShareOneFileAndLeaveNothingBehind) {
  const std::string dir = testing::TempPath("race_dir");
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  const std::string path = dir + "/store";
  constexpr int kWorld = 8;
  std::vector<std::unique_ptr<FileStore>> stores(kWorld);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kWorld; ++rank) {
    threads.emplace_back([&, rank] {
      auto store = FileStore::Open(Member(path, rank, kWorld));
      EXPECT_TRUE(store.ok()) << store.status();
      if (store.ok()) stores[rank] = *std::move(store);
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int rank = 0; rank < kWorld; ++rank) {
    ASSERT_NE(stores[rank], nullptr);
    ASSERT_TRUE(stores[rank]->Add("count", 1).ok());
  }
  EXPECT_EQ(stores[0]->Add("count", 0).value(), kWorld);
  struct stat info;
  ASSERT_EQ(stat(path.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u) << "only this user may read the job's keys";
  auto entries = [&] {
    std::vector<std::string> names;
    DIR* listing = opendir(dir.c_str());
    while (dirent* entry = readdir(listing)) {
      if (entry->d_name[0] != '.') names.push_back(entry->d_name);
    }
    closedir(listing);
    return names;
  };
  EXPECT_EQ(entries(), std::vector<std::string>{"store"});
  stores.clear();  // every rank leaves; the last removes the file
  EXPECT_TRUE(entries().empty());
}

// The path names another file by the time the job ends: the last rank out
// leaves it alone (only the job that created a file removes it).
TEST(FileStoreCreation, AFileSwappedInDuringTheJobIsNotRemoved) {
  const std::string path = testing::TempPath("swapped");
  auto store = FileStore::Open(Member(path, 0, 1));
  ASSERT_TRUE(store.ok()) << store.status();
  const std::string other = testing::TempPath("other");
  const std::string original = ForeignBinary();
  std::ofstream(other, std::ios::binary) << original;
  ASSERT_EQ(rename(other.c_str(), path.c_str()), 0);
  store->reset();
  EXPECT_EQ(ReadAll(path), original);
}

INSTANTIATE_TEST_SUITE_P(Stores, StoreTest, ::testing::Values("tcp", "file"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace dist::store
