// TcpStoreServer::Loop: the handshake, a hello and a proof (challenge-
// response on the token, auth.h), before any request is read.
#include <uv.h>

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "plugins/store/protocol.h"
#include "plugins/store/tcp_store_server_loop.h"
#include "support/auth.h"

namespace dist::store {

bool TcpStoreServer::Loop::HandleHello(Client* client, absl::string_view payload,
                                       std::string* why) {
  Reader reader(payload);
  uint32_t magic = 0;
  uint16_t version = 0;
  if (!reader.U32(&magic) || magic != protocol::kMagic) {
    *why = "not a dist store client (bad magic in the first frame)";
    return false;
  }
  if (!reader.U16(&version)) {
    *why = "malformed hello frame";
    return false;
  }
  Writer reply;
  reply.U32(protocol::kMagic);
  reply.U16(protocol::kVersion);
  auto refuse = [&](absl::StatusCode code, const std::string& message, const std::string& log) {
    reply.U8(static_cast<uint8_t>(code));
    reply.Str(message);
    LogLimited(absl::StrCat("refusing client ", client->peer, ": ", log));
    ++owner_->dropped_;
    client->close_after_write = true;
    Send(client, std::move(reply).Finish());
    return true;
  };
  if (version != protocol::kVersion) {
    // Versions 1 and 2 sent the token here; it is not looked at.
    return refuse(absl::StatusCode::kFailedPrecondition,
                  absl::StrCat("the store server at ", owner_->address_,
                               " speaks protocol version ", protocol::kVersion,
                               " (challenge-response, the token never sent) but this "
                               "client speaks version ",
                               version, "; run the same dist release on every rank"),
                  absl::StrCat("protocol version ", version));
  }
  if (!reader.Str(support::auth::kNonceBytes, &client->client_nonce) ||
      client->client_nonce.size() != support::auth::kNonceBytes || !reader.done()) {
    *why = "malformed hello frame";
    return false;
  }
  // Room for one more is made (or refused) at the proof, after the token
  // is proven: a stranger's hello alone never evicts a rank's connection,
  // and the count cannot overshoot the limit while handshakes overlap.
  client->server_nonce = support::auth::Nonce();
  if (client->server_nonce.empty()) {
    return refuse(
        absl::StatusCode::kInternal,
        absl::StrCat("the store server at ", owner_->address_, " could not draw a random nonce"),
        "no random nonce");
  }
  const bool token = !options_.token.empty();
  reply.U8(0);
  reply.Str("");
  reply.Str(client->server_nonce);
  reply.U8(token ? 1 : 0);
  reply.Str(token ? support::auth::Proof(options_.token, support::auth::Role::kServer,
                                         client->client_nonce, client->server_nonce)
                  : std::string());
  client->phase = Phase::kProof;
  Send(client, std::move(reply).Finish());
  return true;
}

bool TcpStoreServer::Loop::HandleProof(Client* client, absl::string_view payload,
                                       std::string* why) {
  Reader reader(payload);
  std::string proof;
  if (!reader.Str(support::auth::kProofBytes, &proof) || !reader.done()) {
    *why = "malformed proof frame";
    return false;
  }
  Writer reply;
  if (!options_.token.empty() &&
      !support::auth::ProofMatches(options_.token, support::auth::Role::kClient,
                                   client->client_nonce, client->server_nonce, proof)) {
    reply.U8(static_cast<uint8_t>(absl::StatusCode::kUnauthenticated));
    reply.Str(
        absl::StrCat("the store server at ", owner_->address_,
                     proof.empty() ? " requires a token and none was given" : " refused the token",
                     "; set the same DIST_STORE_TOKEN (or the store_token option) on every "
                     "rank and on the server"));
    LogLimited(absl::StrCat("refusing client ", client->peer, ": ",
                            proof.empty() ? "no token" : "wrong token"));
    ++owner_->dropped_;
    client->close_after_write = true;
  } else if (failure_.has_value()) {
    // A late rank: the rendezvous it wants to join is over. Checked after
    // the token, so only the job's own ranks hear the reason.
    reply.U8(static_cast<uint8_t>(absl::StatusCode::kFailedPrecondition));
    reply.Str(*failure_);
    ++owner_->dropped_;
    client->close_after_write = true;
  } else if (authenticated_ >= limits_.max_connections &&
             !EvictIdle(absl::StrCat(authenticated_,
                                     " connections are authenticated, the limit "
                                     "(max_connections)"))) {
    // Full of busy connections: the client retries until its timeout.
    reply.U8(static_cast<uint8_t>(absl::StatusCode::kResourceExhausted));
    reply.Str(absl::StrCat("the store server at ", owner_->address_, " already serves ",
                           authenticated_, " connections, its limit (max_connections)"));
    LogLimited(absl::StrCat("refusing client ", client->peer, ": too many connections"));
    ++owner_->dropped_;
    client->close_after_write = true;
  } else {
    reply.U8(0);
    reply.Str("");
    client->phase = Phase::kReady;
    client->active_ms = uv_now(&loop_);
    client->client_nonce.clear();
    client->server_nonce.clear();
    --pending_;
    ++authenticated_;
  }
  Send(client, std::move(reply).Finish());
  return true;
}

}  // namespace dist::store
