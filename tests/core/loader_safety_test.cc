// The loader runs only what was asked for: a truncated or foreign file is a
// one-line error naming it (not a SIGBUS), a name is resolved by file name
// alone (a typo loads nothing), a bare "x.so" is a name, DIST_PLUGIN_PATH
// entries must be absolute, and files or directories other users can write
// are refused with the fix. Each case runs in a forked child with its own
// registry and environment; the child must exit normally.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "dist/dist.h"
#include "dist/registry.h"
#include "gtest/gtest.h"

namespace {

std::string Fixture(const std::string& file) {
  return absl::StrCat(std::getenv("TEST_SRCDIR"), "/dist/tests/core/fixtures/", file);
}

std::string NewDir(const std::string& name) {
  static int counter = 0;
  const std::string dir =
      absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name, "_", getpid(), "_", ++counter);
  EXPECT_EQ(mkdir(dir.c_str(), 0755), 0) << dir;
  EXPECT_EQ(chmod(dir.c_str(), 0755), 0);  // whatever the umask
  return dir;
}

// Copies `from` to `to` (at most `limit` bytes) with mode 0755.
void Copy(const std::string& from, const std::string& to, size_t limit = SIZE_MAX) {
  std::ifstream in(from, std::ios::binary);
  ASSERT_TRUE(in) << from;
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() > limit) bytes.resize(limit);
  std::ofstream out(to, std::ios::binary | std::ios::trunc);
  out << bytes;
  out.close();
  ASSERT_EQ(chmod(to.c_str(), 0755), 0);
}

size_t FileSize(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? static_cast<size_t>(st.st_size) : 0;
}

struct ChildResult {
  int status = 0;
  std::string text;
};

// Runs body() in a forked child (fresh registry, its own environment) and
// returns what it printed and how it ended.
ChildResult InChild(const std::function<std::string()>& body) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    const std::string text = body();
    (void)!write(fds[1], text.data(), text.size());
    _exit(0);
  }
  close(fds[1]);
  ChildResult result;
  char buffer[4096];
  ssize_t n;
  while ((n = read(fds[0], buffer, sizeof(buffer))) > 0) result.text.append(buffer, n);
  close(fds[0]);
  waitpid(pid, &result.status, 0);
  return result;
}

std::string LoadBackend(const std::string& name) {
  const dist_backend_plugin_t* plugin = nullptr;
  dist_error_t* error = dist_load_backend(name.c_str(), &plugin);
  if (error == nullptr) return absl::StrCat("OK ", plugin->name);
  std::string text = dist_error_message(error);
  dist_error_destroy(error);
  return text;
}

std::string LoadRendezvous(const std::string& scheme) {
  const dist_rendezvous_plugin_t* plugin = nullptr;
  dist_error_t* error = dist_load_rendezvous(scheme.c_str(), &plugin);
  if (error == nullptr) return absl::StrCat("OK ", plugin->name);
  std::string text = dist_error_message(error);
  dist_error_destroy(error);
  return text;
}

// LoadBackend(name) in a child whose DIST_PLUGIN_PATH is `dir` alone.
ChildResult LoadBackendFrom(const std::string& dir, const std::string& name) {
  return InChild([&] {
    setenv("DIST_PLUGIN_PATH", dir.c_str(), 1);
    return LoadBackend(name);
  });
}

#define EXPECT_EXITED_NORMALLY(result)                                                             \
  EXPECT_TRUE(WIFEXITED((result).status) && WEXITSTATUS((result).status) == 0)                     \
      << "child ended with status " << (result).status                                             \
      << (WIFSIGNALED((result).status) ? absl::StrCat(" (signal ", WTERMSIG((result).status), ")") \
                                       : std::string())

TEST(LoaderSafety, TruncatedPluginIsAnErrorNamingItNotASigbus) {
  const std::string good = Fixture("libdist-backend-fixture_good.so");
  for (size_t size : {FileSize(good) / 2, size_t{4096}, size_t{10}}) {
    const std::string dir = NewDir("truncated");
    const std::string file = dir + "/libdist-backend-fixture_good.so";
    Copy(good, file, size);
    for (const std::string& ask : {std::string("fixture_good"), file}) {
      ChildResult result = LoadBackendFrom(dir, ask);
      EXPECT_EXITED_NORMALLY(result);
      EXPECT_TRUE(absl::StrContains(result.text, file)) << result.text;
      EXPECT_TRUE(absl::StrContains(result.text, "not a complete ELF shared object"))
          << result.text;
      EXPECT_EQ(result.text.find('\n'), std::string::npos) << "one line: " << result.text;
      if (size > 64) {
        EXPECT_TRUE(absl::StrContains(result.text, "truncated")) << result.text;
      }
    }
  }
}

TEST(LoaderSafety, NotAnElfFileIsAnErrorNamingIt) {
  const std::string dir = NewDir("text");
  const std::string file = dir + "/libdist-backend-text.so";
  {
    std::ofstream(file)
        << "#!/bin/sh\necho this is not a library, but long enough to read a header\n";
  }
  ChildResult result = LoadBackendFrom(dir, "text");
  EXPECT_EXITED_NORMALLY(result);
  EXPECT_TRUE(absl::StrContains(result.text, file + ": not a complete ELF shared object for this "
                                                    "machine (no ELF magic)"))
      << result.text;
}

// A FIFO where a plugin should be: opening it to read its headers waited
// for a writer, for ever.
TEST(LoaderSafety, AFifoNamedAsAPluginIsAnErrorNotAHang) {
  const std::string dir = NewDir("fifo");
  const std::string file = dir + "/libdist-backend-fifo.so";
  ASSERT_EQ(mkfifo(file.c_str(), 0600), 0);
  ChildResult result = LoadBackendFrom(dir, "fifo");
  EXPECT_EXITED_NORMALLY(result);
  EXPECT_TRUE(absl::StrContains(result.text, file + ": not a complete ELF shared object for this "
                                                    "machine (not a regular file)"))
      << result.text;
}

TEST(LoaderSafety, TyposLoadNothingAndListNamesFromFileNames) {
  // Both plugin kinds hold a file that aborts the process when loaded.
  const std::string dir = NewDir("typo");
  Copy(Fixture("libdist-backend-fixture_constructor_aborts.so"), dir + "/libdist-backend-boom.so");
  Copy(Fixture("libdist-backend-fixture_constructor_aborts.so"),
       dir + "/libdist-rendezvous-bang.so");
  ChildResult backend = LoadBackendFrom(dir, "glo");
  EXPECT_EXITED_NORMALLY(backend);
  EXPECT_TRUE(absl::StrContains(backend.text, "unknown backend 'glo'; available: "))
      << backend.text;
  EXPECT_TRUE(absl::StrContains(backend.text, "boom")) << backend.text;
  EXPECT_TRUE(absl::StrContains(backend.text, "gloo")) << backend.text;
  EXPECT_TRUE(absl::StrContains(backend.text, dir)) << backend.text;

  ChildResult rendezvous = InChild([&] {
    setenv("DIST_PLUGIN_PATH", dir.c_str(), 1);
    return LoadRendezvous("foo");
  });
  EXPECT_EXITED_NORMALLY(rendezvous);
  EXPECT_TRUE(
      absl::StrContains(rendezvous.text, "no rendezvous plugin handles 'foo://'; available: "))
      << rendezvous.text;
  EXPECT_TRUE(absl::StrContains(rendezvous.text, "bang://")) << rendezvous.text;
  EXPECT_TRUE(absl::StrContains(rendezvous.text, "tcp://")) << rendezvous.text;

  // Asked for by name, it does run (and kills the child): the test's proof
  // that the misses above really had it within reach.
  ChildResult asked = LoadBackendFrom(dir, "boom");
  EXPECT_TRUE(WIFSIGNALED(asked.status) && WTERMSIG(asked.status) == SIGABRT) << asked.status;
}

TEST(LoaderSafety, ABareFileNameIsANameNotAPath) {
  const std::string dir = NewDir("bare");
  Copy(Fixture("libdist-backend-fixture_good.so"), dir + "/libdist-backend-fixture_good.so");
  ChildResult result = InChild([&] {
    if (chdir(dir.c_str()) != 0) return std::string("chdir failed");
    return LoadBackend("libdist-backend-fixture_good.so");
  });
  EXPECT_EXITED_NORMALLY(result);
  EXPECT_TRUE(absl::StrContains(result.text, "unknown backend 'libdist-backend-fixture_good.so'"))
      << result.text;
  ChildResult with_slash = InChild([&] {
    if (chdir(dir.c_str()) != 0) return std::string("chdir failed");
    return LoadBackend("./libdist-backend-fixture_good.so");
  });
  EXPECT_EQ(with_slash.text, "OK fixture_good");
}

TEST(LoaderSafety, RelativePluginPathEntriesAreRefused) {
  const std::string dir = NewDir("relative");
  Copy(Fixture("libdist-backend-fixture_good.so"), dir + "/libdist-backend-fixture_good.so");
  ChildResult result = InChild([&] {
    if (chdir(std::getenv("TEST_TMPDIR")) != 0) return std::string("chdir failed");
    setenv("DIST_PLUGIN_PATH", dir.substr(dir.find_last_of('/') + 1).c_str(), 1);
    return LoadBackend("fixture_good");
  });
  EXPECT_EXITED_NORMALLY(result);
  EXPECT_TRUE(absl::StrContains(result.text, "environment (DIST_PLUGIN_PATH): entry '"))
      << result.text;
  EXPECT_TRUE(absl::StrContains(result.text, "is relative")) << result.text;
  EXPECT_TRUE(absl::StrContains(result.text, "use absolute directories")) << result.text;
}

TEST(LoaderSafety, PluginsOthersCanWriteAreRefusedUnlessAllowed) {
  const std::string dir = NewDir("writable");
  const std::string file = dir + "/libdist-backend-fixture_good.so";
  Copy(Fixture("libdist-backend-fixture_good.so"), file);
  ASSERT_EQ(chmod(file.c_str(), 0777), 0);
  ChildResult refused = LoadBackendFrom(dir, "fixture_good");
  EXPECT_EXITED_NORMALLY(refused);
  EXPECT_TRUE(absl::StrContains(refused.text,
                                "refusing plugin file " + file + ": it is writable by every user"))
      << refused.text;
  EXPECT_TRUE(absl::StrContains(refused.text, "chmod go-w")) << refused.text;
  EXPECT_TRUE(absl::StrContains(refused.text, "DIST_ALLOW_WRITABLE_PLUGINS=1")) << refused.text;

  ChildResult allowed = InChild([&] {
    setenv("DIST_PLUGIN_PATH", dir.c_str(), 1);
    setenv("DIST_ALLOW_WRITABLE_PLUGINS", "1", 1);
    return LoadBackend("fixture_good");
  });
  EXPECT_EQ(allowed.text, "OK fixture_good");

  // A directory that the group can write: anyone in it could drop a plugin in.
  ASSERT_EQ(chmod(file.c_str(), 0755), 0);
  ASSERT_EQ(chmod(dir.c_str(), 0775), 0);
  ChildResult dir_refused = LoadBackendFrom(dir, file);
  EXPECT_EXITED_NORMALLY(dir_refused);
  EXPECT_TRUE(absl::StrContains(dir_refused.text,
                                "refusing plugin directory " + dir + ": it is writable by group"))
      << dir_refused.text;
}

TEST(LoaderSafety, ARendezvousFileMustHandleTheSchemeItIsNamedFor) {
  const std::string dir = NewDir("misnamed");
  Copy(Fixture("libdist-rendezvous-memory.so"), dir + "/libdist-rendezvous-pigeon.so");
  ChildResult result = InChild([&] {
    setenv("DIST_PLUGIN_PATH", dir.c_str(), 1);
    return LoadRendezvous("pigeon");
  });
  EXPECT_EXITED_NORMALLY(result);
  EXPECT_TRUE(absl::StrContains(result.text, "is named for 'pigeon://' but handles memory"))
      << result.text;
}

}  // namespace
