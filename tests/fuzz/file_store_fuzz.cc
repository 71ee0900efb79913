// libFuzzer target: the file store's record reader. The input becomes the
// store file (after a valid dist header when the first byte is odd, so the
// records behind it are reached); the store opens it as a plain store and as
// a rendezvous member and reads every key. Foreign or malformed files must
// be refused with an error, never crash, and never be written to unless
// they start with dist's header.
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "plugins/store/file_store.h"
#include "plugins/store/protocol.h"

namespace {

std::string Header(int world_size) {
  dist::store::protocol::Writer header;
  header.U8(1);
  header.U32(0x53465344);  // "DSFS"
  header.U16(2);
  header.I64(world_size);
  header.I64(absl::ToUnixMillis(absl::Now()));
  header.Str("fuzzhost:1");
  return std::move(header).Finish();
}

std::string ReadAll(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = [] {
    const char* dir = getenv("TMPDIR");
    return absl::StrCat(dir ? dir : "/tmp", "/dist_file_store_fuzz.", getpid());
  }();
  const bool dist_header = size > 0 && (data[0] & 1);
  const int world_size = size > 1 ? data[1] % 4 : 0;
  std::string contents(reinterpret_cast<const char*>(data), size);
  if (dist_header) contents = Header(world_size) + contents.substr(std::min<size_t>(size, 2));
  for (const int members : {0, 2}) {
    unlink(path.c_str());
    std::ofstream(path, std::ios::binary) << contents;
    dist::store::FileStoreOptions options;
    options.path = path;
    options.rank = members > 0 ? 1 : -1;
    options.world_size = members;
    options.timeout = absl::Milliseconds(100);
    auto store = dist::store::FileStore::Open(options);
    if (store.ok()) {
      (void)(*store)->NumKeys();
      (void)(*store)->Get("k", absl::Milliseconds(1));
      (void)(*store)->Check({"a", "b"});
    } else if (!contents.empty() && !dist_header && ReadAll(path) != contents &&
               contents.compare(0, 5, Header(0).substr(0, 5)) != 0) {
      abort();  // a refused foreign file was changed
    }
  }
  unlink(path.c_str());
  return 0;
}
