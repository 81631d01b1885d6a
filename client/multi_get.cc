// MultiGet by RPC: the keys grouped by the region their walk begins in (the path cache's leaf meganode, or the root's
// region), one STORE_MULTI_GET per group, all in flight at once; then again for the keys a server sent elsewhere (its
// meganode is on another server) or could not answer yet, until every key is answered or the deadline passes.
#include <fmt/format.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "client/store_client.h"
#include "client/store_client_internal.h"
#include "common/key_limits.h"
#include "rpc/proto/store.pb.h"

namespace cell::client {

using cell::proto::StoreMethod;

namespace {
constexpr size_t kKeysPerRequest = 10000;  // the server's limit (server/store_handlers.cc)
}  // namespace

class StoreClient::MultiGetRounds {
 public:
  MultiGetRounds(StoreClient& client, const std::vector<std::string>& keys, std::vector<std::string>* values,
                 std::vector<Status>* out, Deadline deadline)
      : client_(client), keys_(keys), values_(*values), out_(*out), deadline_(deadline), at_(keys.size()) {}

  void Run() {
    std::vector<size_t> pending;
    for (size_t i = 0; i < keys_.size(); ++i) {
      out_[i] = CheckKeyValue(keys_[i], {});
      if (!out_[i].ok()) continue;
      at_[i] = client_.paths_.Lookup(keys_[i]);
      pending.push_back(i);
    }
    Backoff backoff(std::chrono::milliseconds(1), std::chrono::milliseconds(100), deadline_);
    while (!pending.empty()) {
      progress_ = false;
      pending = Round(pending);
      if (pending.empty() || progress_) continue;
      // Nothing moved on (keys locked by committing transactions, say): wait a little, within the deadline.
      const auto due = backoff.Next();
      if (!due) {
        for (size_t i : pending) {
          out_[i] = Status::DeadlineExceeded(fmt::format("key '{}' was not answered in time: {}", keys_[i], last_[i]));
        }
        return;
      }
      std::this_thread::sleep_until(*due);
    }
  }

 private:
  // One request per region (and per kKeysPerRequest keys), all in flight; returns the keys to ask again.
  std::vector<size_t> Round(const std::vector<size_t>& pending) {
    std::map<uint32_t, std::vector<size_t>> groups;  // by the region the walk begins in (0: the root's)
    for (size_t i : pending) groups[at_[i].region].push_back(i);
    std::vector<std::vector<size_t>> requests;
    for (auto& [region, keys] : groups) {
      for (size_t j = 0; j < keys.size(); j += kKeysPerRequest) {
        requests.emplace_back(keys.begin() + j, keys.begin() + std::min(keys.size(), j + kKeysPerRequest));
      }
    }
    std::vector<size_t> again;
    size_t left = requests.size();
    for (const std::vector<size_t>& chunk : requests) {
      client_.stats_.server_searches.fetch_add(chunk.size(), std::memory_order_relaxed);
      client_.StartRequest(
          StoreMethod::STORE_MULTI_GET, /*idempotent=*/true, /*follow=*/false, at_[chunk[0]], deadline_,
          [this, &chunk](const Route& route, GlobalPtr, std::string* out) {
            cell::proto::MultiGetRequest request;
            request.mutable_target()->set_region(route.entry.region);
            request.mutable_target()->set_epoch(route.entry.epoch);
            for (size_t i : chunk) {
              request.add_keys(keys_[i]);
              request.add_meganodes(at_[i].region == route.entry.region ? at_[i].Pack() : 0);
            }
            request.SerializeToString(out);
          },
          [this, &chunk, &again, &left](const Status& status, cell::proto::StoreReply* reply) {
            std::lock_guard lock(mu_);
            Take(chunk, status, reply, &again);
            if (--left == 0) done_.notify_all();
          });
    }
    rpc::FlushHeldSends();
    std::unique_lock lock(mu_);
    done_.wait(lock, [&] { return left == 0; });
    return again;
  }

  // A reply's answers (under mu_).
  void Take(const std::vector<size_t>& chunk, const Status& status, cell::proto::StoreReply* reply,
            std::vector<size_t>* again) {
    if (status.ok() && reply->gets_size() != static_cast<int>(chunk.size())) {
      for (size_t i : chunk) out_[i] = Status::Corruption("a multi-get reply does not answer every key");
      return;
    }
    for (size_t j = 0; j < chunk.size(); ++j) {
      const size_t i = chunk[j];
      if (!status.ok()) {  // the request's final error (its retries are done)
        out_[i] = status;
        continue;
      }
      cell::proto::GetResult& g = *reply->mutable_gets(static_cast<int>(j));
      if (g.leaf() != 0) {
        client_.paths_.Insert(btree::MeganodeRange{GlobalPtr::Unpack(g.leaf()), g.leaf_min(), g.leaf_max()});
      }
      if (g.elsewhere() != 0 || g.later()) {
        if (g.elsewhere() != 0) at_[i] = GlobalPtr::Unpack(g.elsewhere());
        again->push_back(i);
        progress_ = true;
      } else if (!g.error().empty()) {
        last_[i] = g.error();
        again->push_back(i);
      } else {
        progress_ = true;
        out_[i] = g.found() ? Status::OK() : Status::NotFound(fmt::format("no key '{}'", keys_[i]));
        if (g.found()) values_[i] = std::move(*g.mutable_value());
      }
    }
  }

  StoreClient& client_;
  const std::vector<std::string>& keys_;
  std::vector<std::string>& values_;
  std::vector<Status>& out_;
  const Deadline deadline_;
  std::vector<GlobalPtr> at_;  // where each key's walk begins (null: the root)
  std::mutex mu_;
  std::condition_variable done_;
  bool progress_ = false;               // a key was answered or moved on in this round
  std::map<size_t, std::string> last_;  // the last error of a key asked again
};

std::vector<Status> StoreClient::MultiGet(const std::vector<std::string>& keys, std::vector<std::string>* values,
                                          Side side, Deadline deadline) {
  std::vector<Status> out(keys.size());
  if (Status s = CheckMayWait(); !s.ok()) return std::vector<Status>(keys.size(), s);
  uint64_t server = 0;
  const bool on_server =
      side == Side::kServer ||
      (side == Side::kSelector && SearchOnServer(GlobalPtr(), /*may_block=*/true, &server, Decider::kFollow));
  if (!on_server) {
    for (size_t i = 0; i < keys.size(); ++i) out[i] = Get(keys[i], &(*values)[i], Side::kClient, deadline);
    return out;
  }
  MultiGetRounds(*this, keys, values, &out, deadline).Run();
  return out;
}

}  // namespace cell::client
