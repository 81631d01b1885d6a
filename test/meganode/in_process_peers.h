// Peers for unit tests of trees spread over "servers": another GlobalTree in the same process, called directly (a
// stand-in for server/'s rpc peers).
#pragma once

#include <atomic>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include "meganode/global_tree.h"

namespace cell::meganode {

// Peers for a tree whose remote splits go to another tree in the same process (a unit-test stand-in for server/'s
// rpc peers). The other tree is set once both are open, and cleared before either goes; meanwhile calls fail.
// The other tree of a pair, called directly. Calls hold `gate` shared: a test unlinks the trees under it exclusively
// (Unlink), so no background thread is still inside the other tree when either is destroyed.
class InProcessPeers final : public Peers {
 public:
  InProcessPeers(std::atomic<GlobalTree*>* other, std::shared_mutex* gate) : other_(other), gate_(gate) {}
  bool HavePeers() override { return other_->load() != nullptr; }
  StatusOr<RemoteMeganode> CreateMeganode(const btree::MeganodeInfo& info,
                                          const std::vector<MovedEntry>& entries) override {
    std::shared_lock lock(*gate_);
    CELL_ASSIGN_OR_RETURN(GlobalTree * other, Other());
    CELL_ASSIGN_OR_RETURN(RemoteMeganode n, other->CreateSealed(info));
    if (Status s = other->Fill(n, entries); !s.ok()) {
      (void)other->Abandon(n);
      return s;
    }
    return n;
  }
  Status Unseal(const RemoteMeganode& meganode) override {
    std::shared_lock lock(*gate_);
    CELL_ASSIGN_OR_RETURN(GlobalTree * other, Other());
    return other->Unseal(meganode);
  }
  void Abandon(const RemoteMeganode& meganode) override {
    std::shared_lock lock(*gate_);
    if (auto other = Other(); other.ok()) (void)(*other)->Abandon(meganode);
  }
  Status InsertSeparator(GlobalPtr at, int level, const std::string& separator, GlobalPtr child) override {
    std::shared_lock lock(*gate_);
    CELL_ASSIGN_OR_RETURN(GlobalTree * other, Other());
    return other->InsertSeparator(at, level, separator, child);
  }
  StatusOr<TxnOutcome> TxnStatus(GlobalPtr start, std::string_view key, uint64_t txid) override {
    std::shared_lock lock(*gate_);
    CELL_ASSIGN_OR_RETURN(GlobalTree * other, Other());
    TxnOutcome outcome;
    GlobalPtr elsewhere;
    CELL_RETURN_IF_ERROR(other->TxnStatus(key, txid, start, &elsewhere, &outcome));
    if (!elsewhere.is_null()) return Status::Unavailable("the key went on elsewhere");
    return outcome;
  }
  Status TxnApply(GlobalPtr start, std::string_view key, uint64_t txid, bool commit) override {
    std::shared_lock lock(*gate_);
    CELL_ASSIGN_OR_RETURN(GlobalTree * other, Other());
    GlobalPtr elsewhere;
    CELL_RETURN_IF_ERROR(other->TxnApply(key, txid, commit, start, &elsewhere));
    return elsewhere.is_null() ? Status::OK() : Status::Unavailable("the key went on elsewhere");
  }

 private:
  StatusOr<GlobalTree*> Other() {
    GlobalTree* other = other_->load();
    if (other == nullptr) return Status::Unavailable("the other tree is not there");
    return other;
  }
  std::atomic<GlobalTree*>* other_;
  std::shared_mutex* gate_;
};

// Unlinks a pair of trees: from now on their peers' calls fail, and none is under way.
inline void Unlink(std::shared_mutex& gate, std::atomic<GlobalTree*>& a, std::atomic<GlobalTree*>& b) {
  std::unique_lock lock(gate);
  a = nullptr;
  b = nullptr;
}

}  // namespace cell::meganode
