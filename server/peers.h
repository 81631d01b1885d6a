// ServerPeers: what this server's tree asks of the other servers (meganode/global_tree.h, Peers), over the same rpc
// layer clients use: the MEGA_* requests of rpc/proto/store.proto. Servers are found through the membership
// (region -> owner -> addresses); one connection per peer, made again when it fails. A new meganode goes to the
// live server with the most free capacity (asked of each, at each placement). Called only from the tree's
// background thread; every call is bounded by the rpc timeout.
//
// Fencing (docs/DESIGN.md, "Ownership", rule 5). A server paused or cut off past its session may have lost its regions
// to a survivor, which recovered them from their log without what the deposed server does once it resumes. So nothing
// is asked of another server unless this one may act (`may_act`: the lease its answers pass, checked as each request
// leaves, after the writes it depends on are durable): a survivor claims the regions only after that lease has run
// out, so what such a request names, the survivor recovers. Abandons are the exception: they undo a create that
// nothing names, which is safe whoever asks, and refusing one would leave the meganode sealed on its server for good.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "meganode/global_tree.h"
#include "membership/membership.h"
#include "rpc/connection_cache.h"
#include "rpc/transport.h"

namespace cell::proto {
class StoreReply;
}

namespace cell::server {

class ServerPeers final : public meganode::Peers {
 public:
  // `membership` must outlive this. `self`: this server's id, never chosen as a peer. `key`: the peer key every
  // connection proves (empty: none). `may_act`: OK while this server may ask anything of others (null: always).
  ServerPeers(membership::Membership* membership, uint64_t self, std::chrono::milliseconds timeout, rpc::Key key,
              std::function<Status()> may_act)
      : membership_(membership), self_(self), timeout_(timeout), key_(std::move(key)), may_act_(std::move(may_act)) {}

  bool HavePeers() override;
  StatusOr<meganode::RemoteMeganode> CreateMeganode(const btree::MeganodeInfo& info,
                                                    const std::vector<meganode::MovedEntry>& entries) override;
  Status Unseal(const meganode::RemoteMeganode& meganode) override;
  void Abandon(const meganode::RemoteMeganode& meganode) override;
  Status InsertSeparator(GlobalPtr at, int level, const std::string& separator, GlobalPtr child) override;
  StatusOr<meganode::TxnOutcome> TxnStatus(GlobalPtr start, std::string_view key, uint64_t txid) override;
  Status TxnApply(GlobalPtr start, std::string_view key, uint64_t txid, bool commit) override;

  // For tests: `fault`, when set, sees the method of each peer call whose reply has arrived; an error it returns is
  // the call's result instead, as if the reply had been lost after the peer acted (a timeout, a failed connection).
  void set_reply_fault(std::function<Status(uint16_t method)> fault);

 private:
  // OK, or why this server may not ask anything of another now (`may_act`).
  Status MayAct() const;
  // The live servers other than this one, re-read at most once a second (at once while none is known, or `fresh`).
  StatusOr<std::vector<membership::ServerInfo>> Others(bool fresh);
  StatusOr<std::shared_ptr<rpc::Connection>> ConnectionTo(const membership::ServerInfo& server);
  StatusOr<std::shared_ptr<rpc::Connection>> OwnerOf(uint32_t region);
  // Of `servers`, those with a free meganode and twice `record_bytes` of free record memory, by free capacity (the
  // smaller of the free fractions of node and extent region), most first; each is asked for its STORE_STATS.
  std::vector<const membership::ServerInfo*> ByFreeCapacity(const std::vector<membership::ServerInfo>& servers,
                                                            uint64_t record_bytes);
  // A MEGA_CREATE token: random, nonzero.
  uint64_t NewToken();
  // Frees, on `server`, the meganode a MEGA_CREATE with `token` made, if it made one; if the server cannot be told
  // now, it is told later (RetryAbandons), while it stays live.
  void AbandonCreated(const membership::ServerInfo& server, uint64_t token);
  bool TryAbandonCreated(const membership::ServerInfo& server, uint64_t token);
  // Tries the abandons still owed again (from HavePeers, which the tree's background thread calls about once a second).
  void RetryAbandons();
  // A store request for `key` (TXN_STATUS, TXN_APPLY), walking from `start` to the key's server as a client does.
  Status KeyCall(GlobalPtr start, uint16_t method, std::string_view key, uint64_t txid, bool commit,
                 proto::StoreReply* reply);
  // A MEGA_* call (refused before it is sent unless this server may act, abandons excepted); the meganode the reply
  // names.
  StatusOr<meganode::RemoteMeganode> Call(rpc::Connection& connection, uint16_t method, const std::string& request);

  membership::Membership* const membership_;
  const uint64_t self_;
  const std::chrono::milliseconds timeout_;
  const rpc::Key key_;
  const std::function<Status()> may_act_;
  rpc::ConnectionCache connections_;
  std::mutex mu_;  // guards what follows
  std::vector<membership::ServerInfo> others_;
  std::chrono::steady_clock::time_point others_read_;
  std::mt19937_64 token_rng_{std::random_device{}()};
  std::vector<std::pair<uint64_t, uint64_t>> pending_abandons_;  // (server id, MEGA_CREATE token) still to abandon
  std::function<Status(uint16_t method)> reply_fault_;
};

}  // namespace cell::server
