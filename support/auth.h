// Mutual challenge-response for the TCP store (protocol version 3): each
// side sends a fresh random nonce, and each proves that it holds the shared
// token with an HMAC-SHA256 over both nonces, so the token itself never
// crosses the wire and a proof cannot be replayed on another connection.
// The crypto is OpenSSL's libcrypto; proofs are compared in constant time.
// Also the source of distrun's per-job token and of gloo's pair secrets.
#ifndef DIST_SUPPORT_AUTH_H_
#define DIST_SUPPORT_AUTH_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace dist::support::auth {

inline constexpr size_t kNonceBytes = 32;
inline constexpr size_t kProofBytes = 32;  // SHA-256

enum class Role { kServer, kClient };

// kNonceBytes from the operating system's random generator; "" if it failed
// (the caller then refuses to authenticate rather than use a weak nonce).
std::string Nonce();

// HMAC-SHA256(token, role label || client_nonce || server_nonce). The
// labels differ, so a server's proof is never accepted as a client's.
std::string Proof(absl::string_view token, Role role, absl::string_view client_nonce,
                  absl::string_view server_nonce);

// Whether `proof` is the right one, compared in constant time.
bool ProofMatches(absl::string_view token, Role role, absl::string_view client_nonce,
                  absl::string_view server_nonce, absl::string_view proof);

// A random secret for one job (hex, 32 bytes of entropy), as distrun makes.
std::string RandomToken();

}  // namespace dist::support::auth

#endif  // DIST_SUPPORT_AUTH_H_
