// libFuzzer target: the store's request handler as a connection holding the peer key reaches it (authenticated and
// well framed, so every method is allowed: the store's and the MEGA_* requests servers send each other), fed with
// random protobuf payloads. After each input the tree must pass its full consistency check
// (GlobalTree::CheckInvariants): whatever a request says, a field the server does not accept is refused, never
// written into the tree. A crash, a sanitizer report or a failed check is a finding.
//
// Each input is a sequence of up to 48 requests against a fresh server (embedded membership, no log) preloaded with
// 60 keys over 16 KiB meganodes, so that there are meganodes of two levels to point at. Payloads are mostly built
// from the input as messages whose fields are biased toward what the server holds (its meganodes' addresses, the
// pointers and generations its replies named, keys near the preloaded ones, levels around the tree's), and
// sometimes raw bytes.
//
//   cmake -S . -B build-fuzz -DCMAKE_CXX_COMPILER=clang++ -DCELL_FUZZ=ON -DCELL_BUILD_TESTS=OFF -DCELL_BUILD_BENCH=OFF
//   cmake --build build-fuzz --target store_request_fuzz
//   build-fuzz/bin/store_request_fuzz -max_total_time=60 -close_fd_mask=2 build-fuzz/store-corpus
//
// store_request_fuzz_planted is the same target over a tree built with CELL_FUZZ_PLANTED_BUG, which leaves one field
// unchecked (the range of MEGA_FILL's entries): deploy/test.sh requires the fuzzer to find it. CELL_FUZZ_TRACE=1
// prints every request's method and answer (run without -close_fd_mask), to see what an input does.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "rpc/proto/store.pb.h"
#include "server/cell_server.h"

namespace {

using cell::GlobalPtr;
using cell::Status;
namespace proto = cell::proto;

constexpr uint64_t kMeganodeBytes = 16 << 10;
constexpr uint32_t kMeganodes = 128;
// Keys k00000, k00002, ... (even numbers): enough for two levels of meganodes (3 of them), and no more, since the
// preload is most of an input's time. Requests name keys up to kKeySpan: the preloaded ones, between and past them.
constexpr int kPreloaded = 60;
constexpr int kKeySpan = 2 * kPreloaded + 20;

class ReplySink final : public cell::rpc::Responder::Sink {
 public:
  void Send(uint64_t, const Status& status, std::string_view payload) override {
    status_ = status;
    payload_.assign(payload);
  }
  Status status_ = Status::Internal("no reply");
  std::string payload_;
};

class Harness {
 public:
  Harness() {
    cell::server::ServerConfig config;
    config.listen = {"tcp://127.0.0.1:0"};
    config.store.meganode_bytes = kMeganodeBytes;
    config.store.meganodes = kMeganodes;
    config.store.extent_region_bytes = uint64_t{16} << 20;
    auto server = cell::server::CellServer::Start(config);
    if (!server.ok()) {
      std::fprintf(stderr, "store_request_fuzz: cannot start a server: %s\n", server.status().ToString().c_str());
      std::abort();
    }
    server_ = std::move(*server);
    region_ = server_->store().node_region();
    epoch_ = 1;
    for (int i = 0; i < kPreloaded; ++i) {
      proto::KeyRequest put;
      put.mutable_target()->set_region(region_);
      put.mutable_target()->set_epoch(epoch_);
      put.set_key(Key(2 * i));
      put.set_value(std::string(8 + i % 40, 'v'));
      Call(proto::STORE_PUT, put.SerializeAsString());
    }
    Check("after the preload");
    if (server_->store().meganodes_in_use() < 3) {
      std::fprintf(stderr, "store_request_fuzz: the preload made %zu meganodes; the inputs need two levels of them\n",
                   server_->store().meganodes_in_use());
      std::abort();
    }
    known_.push_back({GlobalPtr{region_, 0}, 0});
  }
  ~Harness() { server_->Stop(); }

  static std::string Key(int i) {
    char key[16];
    std::snprintf(key, sizeof key, "k%05d", i);
    return key;
  }

  ReplySink Call(uint16_t method, const std::string& payload) {
    auto sink = std::make_shared<ReplySink>();
    server_->Handle(method, payload, cell::rpc::Responder(sink, 1));
    Harvest(method, sink->payload_);
    return *sink;
  }

  void Send(uint16_t method, const std::string& payload) {
    ReplySink r = Call(method, payload);
    if (std::getenv("CELL_FUZZ_TRACE") != nullptr) {
      std::fprintf(stderr, "%u (%zu bytes): %s\n", method, payload.size(), r.status_.ToString().c_str());
    }
  }

  void Check(const char* when) {
    Status s = server_->store().CheckInvariants();
    if (!s.ok()) {
      std::fprintf(stderr, "store_request_fuzz: the tree fails its consistency check %s: %s\n", when,
                   s.ToString().c_str());
      std::abort();
    }
  }

  void Run(FuzzedDataProvider& in) {
    for (int op = 0; op < 48 && in.remaining_bytes() > 0; ++op) {
      static const uint16_t kMethods[] = {proto::STORE_GET,       proto::STORE_PUT,
                                          proto::STORE_DELETE,    proto::STORE_SCAN,
                                          proto::STORE_STATS,     proto::MEGA_CREATE,
                                          proto::MEGA_FILL,       proto::MEGA_UNSEAL,
                                          proto::MEGA_ABANDON,    proto::MEGA_INSERT_SEPARATOR,
                                          proto::STORE_CAS,       proto::TXN_PREPARE,
                                          proto::TXN_DECIDE,      proto::TXN_APPLY,
                                          proto::TXN_STATUS,      proto::TXN_COMMIT_HERE,
                                          proto::STORE_MULTI_GET, proto::STORE_APPROXIMATE_SIZE};
      const size_t pick = in.ConsumeIntegralInRange<size_t>(0, std::size(kMethods));
      const uint16_t method = pick < std::size(kMethods) ? kMethods[pick] : in.ConsumeIntegral<uint16_t>();
      // A peer fills, unseals or abandons a meganode it had this server create: often that create comes first.
      const bool names_a_made_meganode =
          method == proto::MEGA_FILL || method == proto::MEGA_UNSEAL || method == proto::MEGA_ABANDON;
      if (names_a_made_meganode && created_.ptr.is_null() && in.ConsumeBool()) {
        Send(proto::MEGA_CREATE, Build(proto::MEGA_CREATE, in));
      }
      Send(method, in.ConsumeIntegralInRange(0, 9) == 0 ? in.ConsumeRandomLengthString(256) : Build(method, in));
    }
    Check("after the input");
  }

 private:
  struct Known {
    GlobalPtr ptr;
    uint64_t generation;
  };

  // Pointers and generations the server named: what a client or peer would send back.
  void Harvest(uint16_t method, const std::string& reply) {
    if (known_.size() > 64) known_.erase(known_.begin() + 1);
    if (method == proto::MEGA_CREATE) {
      proto::MegaReply r;
      if (r.ParseFromString(reply) && r.meganode() != 0) {
        known_.push_back({GlobalPtr::Unpack(r.meganode()), r.generation()});
        created_ = known_.back();
        created_min_ = asked_min_;
      }
    } else if (method == proto::STORE_GET || method == proto::STORE_PUT || method == proto::STORE_DELETE) {
      proto::StoreReply r;
      if (r.ParseFromString(reply) && r.leaf() != 0) known_.push_back({GlobalPtr::Unpack(r.leaf()), 0});
    }
  }

  std::string AKey(FuzzedDataProvider& in) {
    switch (in.ConsumeIntegralInRange(0, 7)) {
      case 0:
        return in.ConsumeRandomLengthString(24);
      case 1:
        return std::string(in.ConsumeIntegralInRange<size_t>(250, 300), 'z');
      case 2:
        return "";
      default: {
        std::string k = Key(in.ConsumeIntegralInRange(0, kKeySpan));
        if (in.ConsumeBool()) k += static_cast<char>(in.ConsumeIntegral<uint8_t>());
        return k;
      }
    }
  }

  uint64_t APointer(FuzzedDataProvider& in) {
    switch (in.ConsumeIntegralInRange(0, 7)) {
      case 0:
        return 0;
      case 1:
      case 2:
        return known_[in.ConsumeIntegralInRange<size_t>(0, known_.size() - 1)].ptr.Pack();
      case 3:
        return GlobalPtr{region_, in.ConsumeIntegralInRange<uint64_t>(0, kMeganodes + 4) * kMeganodeBytes}.Pack();
      case 4:
        return GlobalPtr{region_, in.ConsumeIntegralInRange<uint64_t>(0, kMeganodes * kMeganodeBytes + 4096)}.Pack();
      case 5:
        return GlobalPtr{in.ConsumeIntegralInRange<uint32_t>(1, 8), in.ConsumeIntegral<uint16_t>() * kMeganodeBytes}
            .Pack();
      default:
        return in.ConsumeIntegral<uint64_t>();
    }
  }

  // A meganode for the requests that follow a MEGA_CREATE (fill, unseal, abandon): often the one made last.
  void AMeganode(FuzzedDataProvider& in, uint64_t* ptr, uint64_t* generation) {
    if (created_.ptr.is_null() || in.ConsumeIntegralInRange(0, 3) == 0) {
      *ptr = APointer(in);
      *generation = AGeneration(in);
    } else {
      *ptr = created_.ptr.Pack();
      *generation = in.ConsumeIntegralInRange(0, 7) == 0 ? in.ConsumeIntegral<uint64_t>() : created_.generation;
    }
  }

  uint64_t AGeneration(FuzzedDataProvider& in) {
    if (in.ConsumeBool()) return 0;
    if (in.ConsumeBool()) return known_[in.ConsumeIntegralInRange<size_t>(0, known_.size() - 1)].generation;
    return in.ConsumeIntegral<uint64_t>();
  }

  int ALevel(FuzzedDataProvider& in) {
    return in.ConsumeIntegralInRange(-2, 40) * (in.ConsumeIntegralInRange(0, 3) == 0) + in.ConsumeIntegralInRange(0, 2);
  }

  void Target(FuzzedDataProvider& in, proto::Target* t) {
    t->set_region(in.ConsumeIntegralInRange(0, 7) == 0 ? in.ConsumeIntegral<uint32_t>() : region_);
    t->set_epoch(in.ConsumeIntegralInRange<uint64_t>(0, 2));
  }

  std::string Build(uint16_t method, FuzzedDataProvider& in) {
    switch (method) {
      case proto::STORE_GET:
      case proto::STORE_PUT:
      case proto::STORE_DELETE: {
        proto::KeyRequest r;
        Target(in, r.mutable_target());
        r.set_key(AKey(in));
        if (in.ConsumeIntegralInRange(0, 63) == 0) {
          r.set_value(std::string((size_t{1} << 20) + in.ConsumeIntegralInRange(0, 1), 'b'));  // at and over the limit
        } else {
          r.set_value(in.ConsumeRandomLengthString(300));
        }
        if (in.ConsumeBool()) r.set_meganode(APointer(in));
        r.set_want_range(in.ConsumeBool());
        r.set_with_meta(in.ConsumeBool());
        return r.SerializeAsString();
      }
      case proto::STORE_CAS:
      case proto::TXN_PREPARE:
      case proto::TXN_DECIDE:
      case proto::TXN_APPLY:
      case proto::TXN_STATUS: {
        // A few transaction ids and keys, so that steps meet each other's locks; expiries past and future.
        proto::KeyRequest r;
        Target(in, r.mutable_target());
        r.set_key(in.ConsumeBool() ? Key(in.ConsumeIntegralInRange(1, 8)) : AKey(in));
        r.set_value(in.ConsumeRandomLengthString(300));
        if (in.ConsumeBool()) r.set_meganode(APointer(in));
        r.set_expected(in.ConsumeBool() ? std::string() : in.ConsumeRandomLengthString(16));
        r.set_expect_absent(in.ConsumeBool());
        r.set_delete_(in.ConsumeBool());
        proto::TxnStep* t = r.mutable_txn();
        t->set_txid(in.ConsumeIntegralInRange<uint64_t>(0, 3));
        t->set_expect(in.ConsumeIntegralInRange<uint32_t>(0, 3));
        t->set_checksum(in.ConsumeIntegralInRange<uint64_t>(0, 2));
        t->set_put(in.ConsumeBool());
        t->set_primary(in.ConsumeBool() ? r.key() : AKey(in));
        const int n = in.ConsumeIntegralInRange(0, 3);
        for (int i = 0; i < n; ++i) t->add_secondaries(AKey(in));
        t->set_expires_us(in.ConsumeIntegral<uint64_t>());
        t->set_commit(in.ConsumeBool());
        return r.SerializeAsString();
      }
      case proto::TXN_COMMIT_HERE: {
        proto::KeyRequest r;
        Target(in, r.mutable_target());
        if (in.ConsumeBool()) r.set_meganode(APointer(in));
        proto::TxnCommit* c = r.mutable_commit();
        c->set_txid(in.ConsumeIntegralInRange<uint64_t>(0, 3));
        c->set_expires_us(in.ConsumeIntegral<uint64_t>());
        const int writes = in.ConsumeIntegralInRange(0, 3);
        for (int i = 0; i < writes; ++i) {
          auto* w = c->add_writes();
          w->set_key(in.ConsumeBool() ? Key(in.ConsumeIntegralInRange(1, 8)) : AKey(in));
          if (in.ConsumeBool()) w->set_meganode(APointer(in));
          w->set_expect(in.ConsumeIntegralInRange<uint32_t>(0, 3));
          w->set_checksum(in.ConsumeIntegralInRange<uint64_t>(0, 2));
          w->set_put(in.ConsumeBool());
          w->set_value(in.ConsumeRandomLengthString(64));
        }
        r.set_key(writes > 0 && in.ConsumeBool() ? c->writes(0).key() : AKey(in));
        if (in.ConsumeBool()) {
          auto* read = c->add_reads();
          read->set_key(AKey(in));
          read->set_found(in.ConsumeBool());
        }
        if (in.ConsumeBool()) {
          auto* range = c->add_ranges();
          range->set_start(AKey(in));
          range->set_end(AKey(in));
          if (in.ConsumeBool()) range->add_seen()->set_key(AKey(in));
        }
        return r.SerializeAsString();
      }
      case proto::STORE_SCAN:
      case proto::STORE_APPROXIMATE_SIZE: {  // the same request; an estimate reads only start, end and meganode
        proto::ScanRequest r;
        Target(in, r.mutable_target());
        r.set_start(AKey(in));
        r.set_end(AKey(in));
        r.set_limit(in.ConsumeIntegralInRange<uint32_t>(0, 40));
        if (in.ConsumeBool()) r.set_meganode(APointer(in));
        r.set_with_meta(in.ConsumeBool());
        r.set_reverse(in.ConsumeBool());
        r.set_keys_only(in.ConsumeBool());
        return r.SerializeAsString();
      }
      case proto::STORE_MULTI_GET: {
        proto::MultiGetRequest r;
        Target(in, r.mutable_target());
        const int n = in.ConsumeIntegralInRange(0, 8);
        for (int i = 0; i < n; ++i) {
          r.add_keys(in.ConsumeBool() ? Key(in.ConsumeIntegralInRange(1, kKeySpan)) : AKey(in));
          r.add_meganodes(in.ConsumeBool() ? APointer(in) : 0);
        }
        if (in.ConsumeIntegralInRange(0, 15) == 0) r.add_meganodes(0);  // one more meganode than keys
        return r.SerializeAsString();
      }
      case proto::MEGA_CREATE: {
        proto::MegaCreate r;
        r.mutable_info()->set_min(in.ConsumeBool() ? Key(in.ConsumeIntegralInRange(1, kKeySpan)) : AKey(in));
        asked_min_ = r.info().min();
        switch (in.ConsumeIntegralInRange(0, 3)) {
          case 0:
            break;  // no max
          case 1:
            r.mutable_info()->set_max(AKey(in));
            break;
          default:
            r.mutable_info()->set_max(r.info().min() + "~");
            break;  // a range that is one
        }
        r.mutable_info()->set_right(in.ConsumeBool() ? 0 : APointer(in));
        r.mutable_info()->set_level(in.ConsumeBool() ? 0 : ALevel(in));
        return r.SerializeAsString();
      }
      case proto::MEGA_FILL: {
        proto::MegaFill r;
        uint64_t ptr = 0, generation = 0;
        AMeganode(in, &ptr, &generation);
        r.set_meganode(ptr);
        r.set_generation(generation);
        const int n = in.ConsumeIntegralInRange(0, 8);
        for (int i = 0; i < n; ++i) {
          auto* e = r.add_entries();
          // Keys at the made meganode's edge (its min, and just below or above it) as often as any key.
          switch (in.ConsumeIntegralInRange(0, 3)) {
            case 0:
              e->set_key(created_min_);
              break;
            case 1:
              e->set_key(created_min_.empty() ? std::string() : created_min_.substr(0, created_min_.size() - 1));
              break;
            case 2:
              e->set_key(created_min_ + static_cast<char>(in.ConsumeIntegral<uint8_t>()));
              break;
            default:
              e->set_key(AKey(in));
          }
          e->set_value(in.ConsumeRandomLengthString(64));
          if (in.ConsumeBool()) e->set_child(APointer(in));
          e->set_version(in.ConsumeIntegral<uint64_t>());
          e->set_locked(in.ConsumeIntegralInRange(0, 7) == 0);  // a moved lock: its payload is checked
        }
        return r.SerializeAsString();
      }
      case proto::MEGA_UNSEAL:
      case proto::MEGA_ABANDON: {
        proto::MegaRef r;
        uint64_t ptr = 0, generation = 0;
        AMeganode(in, &ptr, &generation);
        r.set_meganode(ptr);
        r.set_generation(generation);
        return r.SerializeAsString();
      }
      case proto::MEGA_INSERT_SEPARATOR: {
        proto::SeparatorRequest r;
        r.set_at(in.ConsumeBool() ? 0 : APointer(in));
        r.set_level(ALevel(in));
        r.set_separator(AKey(in));
        uint64_t child = 0, unused = 0;
        AMeganode(in, &child, &unused);
        r.set_child(child);
        return r.SerializeAsString();
      }
      default:
        return in.ConsumeRandomLengthString(64);
    }
  }

  std::unique_ptr<cell::server::CellServer> server_;
  uint32_t region_ = 0;
  uint64_t epoch_ = 0;
  std::vector<Known> known_;
  Known created_{};                      // the meganode the last successful MEGA_CREATE made
  std::string created_min_, asked_min_;  // its min; the min the last MEGA_CREATE built asked for
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  Harness harness;  // a fresh server per input: a finding replays from its input alone
  harness.Run(in);
  return 0;
}
