// libFuzzer target: init-method URL parsing (plugins/rendezvous/common/url.*)
// and the query checks every scheme applies.
#include <cstddef>
#include <cstdint>
#include <string>

#include "support/url.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto url = dist::support::ParseUrl(text);
  if (!url.ok()) return 0;
  auto query = dist::support::Query::From(
      *url, {"rank", "world_size", "local_rank", "local_world_size", "external", "bind"});
  if (!query.ok()) return 0;
  (void)query->Get("bind");
  (void)query->GetInt("rank", 0, 1 << 20);
  (void)query->GetInt("world_size", 1, 1 << 20);
  (void)query->GetBool("external", false);
  return 0;
}
