// The TCP store's wire protocol.
//
// Every message is a frame: a 4-byte little-endian payload length, then the
// payload. The first frame of a connection is the client's Hello (magic,
// version, token); the server answers with a HelloReply and, if it refused,
// closes. After that the client sends requests (opcode + fields) and the
// server answers each in order with a response (status code, then either an
// error message or the result). Strings are a 4-byte length plus bytes.
// Every length is checked against the frame and the store limits; a peer
// that breaks a rule is disconnected.
//
// Versions: a client sends the version it speaks; the server accepts
// kMinVersion..kVersion and replies with its own, so each side knows what
// the other understands.
//   1: the requests kSet..kNumKeys.
//   2: kFail (a rank's rendezvous failed). A server told so (when it keeps
//      failures: the one rank 0 hosts) refuses every later hello and answers
//      every later request with the reason; version 1 clients read that
//      like any refusal or error. A client sends kFail only to a server that
//      replied version 2 or later, and falls back to version 1 when an older
//      server refuses version 2.
#ifndef DIST_PLUGINS_STORE_PROTOCOL_H_
#define DIST_PLUGINS_STORE_PROTOCOL_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "plugins/store/limits.h"

namespace dist::store::protocol {

inline constexpr uint32_t kMagic = 0x52545344;  // "DSTR" on the wire
inline constexpr uint16_t kVersion = 2;
inline constexpr uint16_t kMinVersion = 1;
// The first version that has kFail.
inline constexpr uint16_t kFailVersion = 2;
inline constexpr size_t kFrameHeaderBytes = 4;
// compare_set carries two values; a wait may carry many keys.
inline constexpr size_t kMaxFrameBytes = 2 * kMaxValueBytes + 64 * 1024;
inline constexpr size_t kMaxTokenBytes = 1024;
inline constexpr size_t kMaxHelloBytes = 4 + 2 + 4 + kMaxTokenBytes;
// A failure reason is one line; longer ones are cut to this.
inline constexpr size_t kMaxReasonBytes = 4096;

enum class Op : uint8_t {
  kSet = 1,
  kGet = 2,       // key, timeout_ms (i64)
  kAdd = 3,       // key, delta (i64)
  kCompareSet = 4,  // key, has_expected (u8), expected, desired
  kRemove = 5,
  kCheck = 6,     // count (u32), keys
  kWait = 7,      // count (u32), keys, timeout_ms (i64)
  kNumKeys = 8,
  kFail = 9,      // reason (<= kMaxReasonBytes); version 2 and later
};

// `reason` as one line of at most kMaxReasonBytes: line breaks become
// spaces, and a longer reason is cut (ending in "...").
std::string OneLineReason(absl::string_view reason);

// Appends little-endian fields to a frame; Finish() fills in the length.
class Writer {
 public:
  Writer() { buffer_.resize(kFrameHeaderBytes); }
  void U8(uint8_t v) { buffer_.push_back(static_cast<char>(v)); }
  void U16(uint16_t v) { Raw(v, 2); }
  void U32(uint32_t v) { Raw(v, 4); }
  void I64(int64_t v) { Raw(static_cast<uint64_t>(v), 8); }
  void Str(absl::string_view s) {
    U32(static_cast<uint32_t>(s.size()));
    buffer_.append(s.data(), s.size());
  }
  // The whole frame, header included.
  std::string Finish() &&;
  size_t payload_size() const { return buffer_.size() - kFrameHeaderBytes; }

 private:
  void Raw(uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) buffer_.push_back(static_cast<char>(v >> (8 * i)));
  }
  std::string buffer_;
};

// Reads fields from a payload; every read fails (returns false) instead of
// running past the end, so a malformed frame is detected, never trusted.
class Reader {
 public:
  explicit Reader(absl::string_view payload) : data_(payload) {}
  bool U8(uint8_t* v);
  bool U16(uint16_t* v);
  bool U32(uint32_t* v);
  bool I64(int64_t* v);
  // A string of at most `max_bytes`.
  bool Str(size_t max_bytes, std::string* out);
  bool done() const { return data_.empty(); }
  size_t remaining() const { return data_.size(); }

 private:
  bool Raw(int bytes, uint64_t* v);
  absl::string_view data_;
};

uint32_t DecodeLength(const char* header);

}  // namespace dist::store::protocol

#endif  // DIST_PLUGINS_STORE_PROTOCOL_H_
