#include "support/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/random.h>

#include <cerrno>

namespace dist::support::auth {
namespace {

constexpr absl::string_view kServerLabel = "dist-store v3 server proof";
constexpr absl::string_view kClientLabel = "dist-store v3 client proof";

}  // namespace

// From the kernel's CSPRNG, which OpenSSL's own generator seeds from: the
// first RAND_bytes of a process set up OpenSSL's DRBG tree, 8 million
// instructions (3-4 ms) of every rank's dist_init (issue 15).
std::string Nonce() {
  std::string nonce(kNonceBytes, '\0');
  size_t filled = 0;
  while (filled < kNonceBytes) {
    const ssize_t got = getrandom(nonce.data() + filled, kNonceBytes - filled, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return "";
    filled += static_cast<size_t>(got);
  }
  return nonce;
}

std::string Proof(absl::string_view token, Role role, absl::string_view client_nonce,
                  absl::string_view server_nonce) {
  std::string message(role == Role::kServer ? kServerLabel : kClientLabel);
  // Length-prefixed, so no two (client, server) nonce pairs give one message.
  message.push_back(static_cast<char>(client_nonce.size()));
  message.append(client_nonce.data(), client_nonce.size());
  message.push_back(static_cast<char>(server_nonce.size()));
  message.append(server_nonce.data(), server_nonce.size());
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (HMAC(EVP_sha256(), token.data(), static_cast<int>(token.size()),
           reinterpret_cast<const unsigned char*>(message.data()), message.size(), out,
           &length) == nullptr ||
      length != kProofBytes) {
    return "";
  }
  return std::string(reinterpret_cast<const char*>(out), length);
}

bool ProofMatches(absl::string_view token, Role role, absl::string_view client_nonce,
                  absl::string_view server_nonce, absl::string_view proof) {
  const std::string expected = Proof(token, role, client_nonce, server_nonce);
  if (expected.size() != kProofBytes || proof.size() != kProofBytes) return false;
  return CRYPTO_memcmp(expected.data(), proof.data(), kProofBytes) == 0;
}

std::string RandomToken() {
  const std::string raw = Nonce();
  if (raw.empty()) return "";
  static const char kDigits[] = "0123456789abcdef";
  std::string hex;
  for (char c : raw) {
    hex.push_back(kDigits[static_cast<unsigned char>(c) >> 4]);
    hex.push_back(kDigits[static_cast<unsigned char>(c) & 15]);
  }
  return hex;
}

}  // namespace dist::support::auth
