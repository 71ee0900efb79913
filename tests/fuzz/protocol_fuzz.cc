// libFuzzer target: the TCP store's wire-protocol decoder. The input is a
// byte stream as it arrives on a connection; it is cut into frames by their
// length prefixes (as the server and client do) and every frame is decoded
// as each request, handshake message and response would be. Nothing may
// read past a frame, crash or allocate more than the frame allows.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "plugins/store/limits.h"
#include "plugins/store/protocol.h"

using dist::store::protocol::DecodeLength;
using dist::store::protocol::kFrameHeaderBytes;
using dist::store::protocol::kMaxFrameBytes;
using dist::store::protocol::Reader;

namespace {

void DecodeEveryWay(absl::string_view payload) {
  {  // a request: opcode, key, and what the opcode carries
    Reader r(payload);
    uint8_t op = 0, flag = 0;
    uint32_t count = 0;
    int64_t number = 0;
    std::string key, a, b;
    if (r.U8(&op) && r.Str(dist::store::kMaxKeyBytes, &key)) {
      (void)(r.Str(dist::store::kMaxValueBytes, &a) || r.I64(&number));
      (void)(r.U8(&flag) && r.Str(dist::store::kMaxValueBytes, &a) &&
             r.Str(dist::store::kMaxValueBytes, &b));
    }
    Reader keys(payload);
    if (keys.U8(&op) && keys.U32(&count) && count <= keys.remaining() / 4) {
      for (uint32_t i = 0; i < count && keys.Str(dist::store::kMaxKeyBytes, &key); ++i) {
      }
      (void)keys.I64(&number);
    }
  }
  {  // a hello, a challenge, a proof, a welcome
    Reader r(payload);
    uint32_t magic = 0;
    uint16_t version = 0;
    uint8_t code = 0, required = 0;
    std::string message, nonce, proof;
    (void)(r.U32(&magic) && r.U16(&version) && r.U8(&code) && r.Str(4096, &message) &&
           r.Str(32, &nonce) && r.U8(&required) && r.Str(32, &proof) && r.done());
    Reader hello(payload);
    (void)(hello.U32(&magic) && hello.U16(&version) && hello.Str(32, &nonce) && hello.done());
  }
  (void)dist::store::protocol::OneLineReason(payload);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view stream(reinterpret_cast<const char*>(data), size);
  while (stream.size() >= kFrameHeaderBytes) {
    const uint32_t length = DecodeLength(stream.data());
    if (length > kMaxFrameBytes) break;  // a peer that sends this is dropped
    const size_t take = std::min<size_t>(length, stream.size() - kFrameHeaderBytes);
    DecodeEveryWay(stream.substr(kFrameHeaderBytes, take));
    stream.remove_prefix(kFrameHeaderBytes + take);
  }
  DecodeEveryWay(absl::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
