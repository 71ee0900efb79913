// The TCP store's wire protocol.
//
// Every message is a frame: a 4-byte little-endian payload length, then the
// payload. Strings are a 4-byte length plus bytes. Every length is checked
// against the frame and the store limits; a peer that breaks a rule is
// disconnected.
//
// Handshake (version 3), before any request:
//   client -> server  Hello:     magic, version, client nonce (32 bytes)
//   server -> client  Challenge: magic, version, code, message, and when
//                     code is 0: server nonce (32 bytes), token required
//                     (u8), server proof (32 bytes; empty without a token)
//   client -> server  Proof:     client proof (32 bytes; empty without a token)
//   server -> client  Welcome:   code, message
// A proof is HMAC-SHA256(token, role || client nonce || server nonce)
// (auth.h), so the token never crosses the wire, a proof is good for one
// connection only, and a client with a token checks the server's proof
// before it sends anything that depends on the token: a program squatting
// on the port learns nothing. A refused hello is answered with the first
// four Challenge fields (code != 0), which is also how versions 1 and 2
// laid out their hello reply, so an old client reads the refusal.
//
// After the handshake the client sends requests (opcode + fields) and the
// server answers each in order with a response (status code, then either an
// error message or the result).
//
// Versions: the server accepts exactly kVersion; an older or newer client
// is refused at its hello with a message naming both versions.
//   1: the requests kSet..kNumKeys; the token was sent in the hello.
//   2: kFail (a rank's rendezvous failed). A server told so (when it keeps
//      failures: the one rank 0 hosts) refuses every later hello and answers
//      every later request with the reason.
//   3: the challenge-response handshake above; the token is never sent.
#ifndef DIST_PLUGINS_STORE_PROTOCOL_H_
#define DIST_PLUGINS_STORE_PROTOCOL_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "plugins/store/limits.h"

namespace dist::store::protocol {

inline constexpr uint32_t kMagic = 0x52545344;  // "DSTR" on the wire
inline constexpr uint16_t kVersion = 3;
inline constexpr size_t kFrameHeaderBytes = 4;
// compare_set carries two values; a wait may carry many keys.
inline constexpr size_t kMaxFrameBytes = 2 * kMaxValueBytes + 64 * 1024;
inline constexpr size_t kMaxTokenBytes = 1024;
// Any handshake frame, either way (a refusal's message included).
inline constexpr size_t kMaxHandshakeBytes = 4096;
// A failure reason is one line; longer ones are cut to this.
inline constexpr size_t kMaxReasonBytes = 4096;

enum class Op : uint8_t {
  kSet = 1,
  kGet = 2,         // key, timeout_ms (i64)
  kAdd = 3,         // key, delta (i64)
  kCompareSet = 4,  // key, has_expected (u8), expected, desired
  kRemove = 5,
  kCheck = 6,  // count (u32), keys
  kWait = 7,   // count (u32), keys, timeout_ms (i64)
  kNumKeys = 8,
  kFail = 9,  // reason (<= kMaxReasonBytes); version 2 and later
};

// The status code of the answer to a kGet or kWait that the server set
// aside while it waited, to make room for a newer one when the room for
// waiting requests was full (the server never answers UNAVAILABLE
// otherwise): the client sends the request again for the time it has left.
// Added within version 3; a client that does not know it reports it as the
// error it reads.
inline constexpr uint8_t kSetAsideCode = 14;  // absl::StatusCode::kUnavailable

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
  // Fields written by another Writer (its Payload()), as they are.
  void Append(absl::string_view fields) { buffer_.append(fields.data(), fields.size()); }
  // The whole frame, header included.
  std::string Finish() &&;
  size_t payload_size() const { return buffer_.size() - kFrameHeaderBytes; }
  // What was written so far, without the header.
  std::string Payload() const { return buffer_.substr(kFrameHeaderBytes); }

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
