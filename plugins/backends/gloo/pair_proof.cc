#include "plugins/backends/gloo/pair_proof.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <exception>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace dist_gloo {
namespace {

constexpr size_t kProofBytes = 32;
// Apart from Gloo's collectives (prefixes 0x01-0x08), the plugin's
// point-to-point slots (0xd1) and every legacy slot (small numbers).
constexpr uint64_t kProofSlot = uint64_t{0xd2} << 56;

// HMAC-SHA256(secret, "dist-gloo-pair" || from || to) into `out`.
void Proof(absl::string_view secret, int from, int to, unsigned char* out) {
  const std::string message = absl::StrCat("dist-gloo-pair ", from, " ", to);
  unsigned int length = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), out, &length);
}

}  // namespace

absl::Status ProvePairs(gloo::Context& context, const std::vector<bool>& connects,
                        absl::string_view secret, absl::Duration timeout, absl::string_view hint) {
  const int rank = context.rank;
  const int size = context.size;
  std::vector<unsigned char> sent(kProofBytes * size);
  std::vector<unsigned char> received(kProofBytes * size);
  int sends = 0;
  int receives = 0;
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    if (connects[peer]) {
      Proof(secret, rank, peer, &sent[kProofBytes * peer]);
      ++sends;
    } else {
      ++receives;
    }
  }
  if (sends + receives == 0) return absl::OkStatus();
  // One deadline for every wait, so that the whole exchange, not each
  // message, is bounded by `timeout`.
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(absl::ToInt64Milliseconds(timeout));
  auto left = [&deadline] {
    return std::max(std::chrono::milliseconds(1),
                    std::chrono::duration_cast<std::chrono::milliseconds>(
                        deadline - std::chrono::steady_clock::now()));
  };
  std::vector<bool> arrived(size, false);
  try {
    auto out = context.createUnboundBuffer(sent.data(), sent.size());
    auto in = context.createUnboundBuffer(received.data(), received.size());
    for (int peer = 0; peer < size; ++peer) {
      if (peer == rank) continue;
      if (connects[peer]) {
        out->send(peer, kProofSlot, kProofBytes * peer, kProofBytes);
      } else {
        in->recv(peer, kProofSlot, kProofBytes * peer, kProofBytes);
      }
    }
    for (int i = 0; i < receives; ++i) {
      int from = -1;
      in->waitRecv(&from, left());
      if (from >= 0 && from < size) arrived[from] = true;
    }
    for (int i = 0; i < sends; ++i) out->waitSend(nullptr, left());
  } catch (const std::exception& e) {
    std::vector<int> missing;
    for (int peer = 0; peer < size; ++peer) {
      if (peer != rank && !connects[peer] && !arrived[peer]) missing.push_back(peer);
    }
    if (missing.empty()) {  // every proof came; one of ours did not go
      return absl::UnavailableError(absl::StrCat("rank ", rank,
                                                 " could not send its proof of membership over "
                                                 "its Gloo connections (",
                                                 e.what(), "); ", hint));
    }
    return absl::DeadlineExceededError(absl::StrCat(
        "rank ", rank, " got no proof of membership over its Gloo connection",
        missing.size() == 1 ? " from rank " : "s from ranks ", absl::StrJoin(missing, ", "),
        " within ", absl::FormatDuration(timeout), " (", e.what(),
        "): another program may have connected to this rank's Gloo port in that rank's place, "
        "or the rank failed; ",
        hint));
  }
  std::vector<int> wrong;
  unsigned char expected[kProofBytes];
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank || connects[peer]) continue;
    Proof(secret, peer, rank, expected);
    if (CRYPTO_memcmp(expected, &received[kProofBytes * peer], kProofBytes) != 0) {
      wrong.push_back(peer);
    }
  }
  if (wrong.empty()) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(
      "rank ", rank, " got a wrong proof of membership over its Gloo connection",
      wrong.size() == 1 ? " from rank " : "s from ranks ", absl::StrJoin(wrong, ", "),
      ": the process at the other end does not know this job's secret (another program "
      "connected to a Gloo port in a rank's place, or a rank of another job); ",
      hint));
}

}  // namespace dist_gloo
