#include "plugins/store/protocol.h"

namespace dist::store::protocol {

std::string Writer::Finish() && {
  const uint32_t length = static_cast<uint32_t>(payload_size());
  for (int i = 0; i < 4; ++i) buffer_[i] = static_cast<char>(length >> (8 * i));
  return std::move(buffer_);
}

bool Reader::Raw(int bytes, uint64_t* v) {
  if (data_.size() < static_cast<size_t>(bytes)) return false;
  uint64_t out = 0;
  for (int i = 0; i < bytes; ++i) {
    out |= static_cast<uint64_t>(static_cast<uint8_t>(data_[i])) << (8 * i);
  }
  data_.remove_prefix(bytes);
  *v = out;
  return true;
}

bool Reader::U8(uint8_t* v) {
  uint64_t raw;
  if (!Raw(1, &raw)) return false;
  *v = static_cast<uint8_t>(raw);
  return true;
}

bool Reader::U16(uint16_t* v) {
  uint64_t raw;
  if (!Raw(2, &raw)) return false;
  *v = static_cast<uint16_t>(raw);
  return true;
}

bool Reader::U32(uint32_t* v) {
  uint64_t raw;
  if (!Raw(4, &raw)) return false;
  *v = static_cast<uint32_t>(raw);
  return true;
}

bool Reader::I64(int64_t* v) {
  uint64_t raw;
  if (!Raw(8, &raw)) return false;
  *v = static_cast<int64_t>(raw);
  return true;
}

bool Reader::Str(size_t max_bytes, std::string* out) {
  uint32_t length;
  if (!U32(&length)) return false;
  if (length > max_bytes || length > data_.size()) return false;
  out->assign(data_.data(), length);
  data_.remove_prefix(length);
  return true;
}

std::string OneLineReason(absl::string_view reason) {
  std::string line(reason.substr(0, kMaxReasonBytes));
  for (char& c : line) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  if (reason.size() > kMaxReasonBytes) line.replace(kMaxReasonBytes - 3, 3, "...");
  return line;
}

uint32_t DecodeLength(const char* header) {
  uint32_t length = 0;
  for (int i = 0; i < 4; ++i) {
    length |= static_cast<uint32_t>(static_cast<uint8_t>(header[i])) << (8 * i);
  }
  return length;
}

}  // namespace dist::store::protocol
