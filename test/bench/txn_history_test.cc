// bench/txn_history.h: the tags and the values that carry them, the record of a thread, its conversion for the
// checker on good and bad synthetic histories (a fork, a stale audit, garbage, an aborted read, unknown outcomes, a
// cut), and the bank and txn-mix loops of bench/txn_workload.h (RunTxnBench, as cell-bench runs them) against two
// fake stores: one whose transactions are isolated, which must pass, and one whose are not, which must fail.
#include "bench/txn_history.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench/hogs.h"
#include "bench/store.h"
#include "bench/txn_workload.h"

namespace cell::bench {
namespace {

namespace sz = serializability;

TEST(Tags, BankValuesCarryTheirTagAndABareBalanceIsTagZero) {
  int64_t balance = 0;
  uint64_t tag = 9;
  ASSERT_TRUE(ParseBankValue(BankValue(-17, 123456789), &balance, &tag));
  EXPECT_EQ(balance, -17);
  EXPECT_EQ(tag, 123456789u);
  ASSERT_TRUE(ParseBankValue("1000", &balance, &tag));
  EXPECT_EQ(balance, 1000);
  EXPECT_EQ(tag, 0u);
  for (const char* bad : {"", " ", "x", "10 ", "10 x", "10 -3", " 10 3", "10  3", "10 3 4"}) {
    EXPECT_FALSE(ParseBankValue(bad, &balance, &tag)) << "'" << bad << "'";
  }
}

TEST(Tags, TxnMixValuesCarryTheirTagAheadOfTheShapesValue) {
  uint64_t tag = 9;
  EXPECT_EQ(SplitTag(TaggedValue(42, "AAAAAAAA"), &tag), "AAAAAAAA");
  EXPECT_EQ(tag, 42u);
  EXPECT_EQ(SplitTag(TaggedValue(7, ""), &tag), "");
  EXPECT_EQ(tag, 7u);
  // Values without a tag (a YCSB load's) are tag 0, whole.
  for (const char* plain : {"AAAAAAAA", "k0001####", "12", ":AA", "12x:AA"}) {
    EXPECT_EQ(SplitTag(plain, &tag), plain);
    EXPECT_EQ(tag, 0u) << plain;
  }
}

TEST(Tags, AreUniquePerWriteAndThreadAndMapToReadableElements) {
  ThreadHistory a(5, 0, 0), b(5, 1, 0);
  const uint64_t a1 = a.NewTag(), a2 = a.NewTag(), b1 = b.NewTag();
  EXPECT_NE(a1, a2);
  EXPECT_NE(a1, b1);
  EXPECT_EQ(TagElement(a1), 1'000'000'000'001);
  EXPECT_EQ(TagElement(a2), 1'000'000'000'002);
  EXPECT_EQ(TagElement(b1), 2'000'000'000'001);
  EXPECT_NE(ThreadHistory(6, 0, 0).NewTag(), a1) << "another run's nonce";
  EXPECT_GT(NewRunNonce(), 0u);
}

TEST(ThreadHistory, RecordsAttemptsOutcomesAndReadModifyWrites) {
  ThreadHistory h(1, 0, 10);
  h.BeginTransaction();
  h.BeginAttempt(100);
  h.Read(7, 0);
  h.BeginAttempt(200);  // the first conflicted
  h.Read(7, 0);
  h.Read(8, 0);
  const uint64_t tag = h.NewTag();
  h.Wrote(7, tag);
  h.Wrote(9, h.NewTag());  // never read: recorded as such
  h.EndTransaction(Status::OK(), 300);
  h.BeginTransaction();
  h.BeginAttempt(400);
  h.EndTransaction(Status::Unavailable("lost"), 500);
  h.BeginTransaction();
  h.BeginAttempt(600);
  h.EndTransaction(Status::Aborted("gave up"), 700);
  ASSERT_EQ(h.attempts().size(), 4u);
  EXPECT_EQ(h.attempts()[0].outcome, AttemptOutcome::kAborted);
  EXPECT_EQ(h.attempts()[0].end_ns, 200);
  EXPECT_EQ(h.attempts()[1].outcome, AttemptOutcome::kCommitted);
  EXPECT_EQ(h.attempts()[1].begin_ns, 200);
  EXPECT_EQ(h.attempts()[1].end_ns, 300);
  EXPECT_EQ(h.attempts()[2].outcome, AttemptOutcome::kUnknown);
  EXPECT_EQ(h.attempts()[3].outcome, AttemptOutcome::kAborted);
  ASSERT_EQ(h.ops().size(), 4u);
  EXPECT_EQ(h.ops()[1].key, 7u);
  EXPECT_EQ(h.ops()[1].written, tag);
  EXPECT_EQ(h.ops()[2].written, 0u);
  EXPECT_EQ(h.ops()[3].read, ThreadHistory::kNoRead);
  EXPECT_FALSE(h.cut());
}

TEST(ThreadHistory, StopsWhenTheSharedBudgetIsSpent) {
  std::atomic<int64_t> budget{3};
  ThreadHistory a(1, 0, 100, &budget), b(1, 1, 100, &budget);
  for (int i = 0; i < 2; ++i) {
    for (ThreadHistory* h : {&a, &b}) {
      h->BeginTransaction();
      h->BeginAttempt(i);
      h->Wrote(1, h->NewTag());
      h->EndTransaction(Status::OK(), i);
    }
  }
  EXPECT_EQ(a.recorded_txns() + b.recorded_txns(), 3u);
  EXPECT_TRUE(b.cut());
  EXPECT_EQ(b.unrecorded_from(), 2u) << "its second write was not recorded";
  a.BeginTransaction();
  EXPECT_FALSE(a.recording());
  EXPECT_TRUE(a.cut());
}

// --- The conversion, on synthetic histories. ---

constexpr uint32_t kNonce = 77;

std::string Name(uint64_t key) { return "a" + std::to_string(key); }

// One transaction of one attempt on `h` from `begin` to `end`: each step reads a key at a tag, and writes it (a
// read-modify-write) if `write`. Returns the tags written.
struct Step {
  uint64_t key;
  uint64_t read;
  bool write = true;
};
std::vector<uint64_t> Txn(ThreadHistory& h, int64_t begin, int64_t end, const std::vector<Step>& steps,
                          const Status& outcome = Status::OK()) {
  std::vector<uint64_t> written;
  h.BeginTransaction();
  h.BeginAttempt(begin);
  for (const Step& step : steps) {
    h.Read(step.key, step.read);
    if (!step.write) continue;
    written.push_back(h.NewTag());
    h.Wrote(step.key, written.back());
  }
  h.EndTransaction(outcome, end);
  return written;
}

HistoryCheck CheckThreads(const std::vector<const ThreadHistory*>& threads) { return CheckHistory(threads, Name); }

std::string Described(const HistoryCheck& check) {
  std::string out = check.summary;
  for (const std::string& anomaly : check.anomalies) out += "\n  " + anomaly;
  return out;
}

bool Mentions(const HistoryCheck& check, const std::string& text) {
  for (const std::string& anomaly : check.anomalies) {
    if (anomaly.find(text) != std::string::npos) return true;
  }
  return false;
}

TEST(ConvertHistory, ASerialBankPassesAndItsListsAreTheChainsOfWrites) {
  ThreadHistory t0(kNonce, 0, 100), t1(kNonce, 1, 100);
  // Transfers between accounts 1 and 2, alternating threads, then an audit of both and one of account 1.
  const auto w1 = Txn(t0, 0, 10, {{1, 0}, {2, 0}});
  const auto w2 = Txn(t1, 20, 30, {{1, w1[0]}, {2, w1[1]}});
  const auto w3 = Txn(t0, 40, 50, {{2, w2[1]}, {1, w2[0]}});
  Txn(t1, 60, 70, {{1, w3[1], false}, {2, w3[0], false}});
  Txn(t0, 55, 80, {{1, w3[1], false}, {3, 0, false}});  // overlaps the audit; account 3 never written
  const ConvertedHistory converted = ConvertHistory({&t0, &t1}, Name);
  EXPECT_TRUE(converted.anomalies.empty());
  ASSERT_EQ(converted.history.txns.size(), 5u);
  // The audit at 60 reads account 1 as the list of its three writes.
  const auto& audit = converted.history.txns[4];
  ASSERT_EQ(audit.begin, 60);
  const auto* read = std::get_if<sz::ReadPrefix>(&audit.ops[0]);
  ASSERT_NE(read, nullptr);
  EXPECT_EQ(read->key, "a1");
  ASSERT_EQ(read->length, 3u);
  EXPECT_EQ(std::vector<int64_t>(read->list->begin(), read->list->begin() + 3),
            (std::vector<int64_t>{TagElement(w1[0]), TagElement(w2[0]), TagElement(w3[1])}));
  const HistoryCheck check = CheckThreads({&t0, &t1});
  EXPECT_TRUE(check.ok) << Described(check);
  EXPECT_EQ(check.checked_txns, 5u);
}

TEST(ConvertHistory, AForkIsALostUpdate) {
  ThreadHistory t0(kNonce, 0, 100), t1(kNonce, 1, 100);
  const auto w1 = Txn(t0, 0, 10, {{1, 0}});
  // Both read w1 and overwrite it, overlapping: neither saw the other.
  Txn(t0, 20, 40, {{1, w1[0]}});
  Txn(t1, 25, 45, {{1, w1[0]}});
  const HistoryCheck check = CheckThreads({&t0, &t1});
  EXPECT_FALSE(check.ok);
  EXPECT_EQ(check.anomaly_counts.at("incompatible-order"), 1u) << Described(check);
  EXPECT_TRUE(Mentions(check, "lost update")) << Described(check);
  EXPECT_TRUE(Mentions(check, "T2 and T3")) << Described(check);
}

TEST(ConvertHistory, AForkWithAnUnknownWriteCountsOnlyIfItWasRead) {
  ThreadHistory t0(kNonce, 0, 100), t1(kNonce, 1, 100);
  const auto w1 = Txn(t0, 0, 10, {{1, 0}});
  const auto lost = Txn(t1, 20, 30, {{1, w1[0]}}, Status::Unavailable("reply lost"));  // did not commit, after all
  const auto w2 = Txn(t0, 40, 50, {{1, w1[0]}});
  Txn(t0, 60, 70, {{1, w2[0], false}});
  EXPECT_TRUE(CheckThreads({&t0, &t1}).ok) << Described(CheckThreads({&t0, &t1}));
  // Once a committed transaction read it, it committed: a fork.
  ThreadHistory t2(kNonce, 2, 100);
  Txn(t2, 80, 90, {{1, lost[0], false}});
  const HistoryCheck check = CheckThreads({&t0, &t1, &t2});
  EXPECT_FALSE(check.ok);
  EXPECT_TRUE(Mentions(check, "lost update")) << Described(check);
}

TEST(ConvertHistory, AStaleAuditIsNotStrictlySerializable) {
  ThreadHistory t0(kNonce, 0, 100), t1(kNonce, 1, 100);
  const auto w1 = Txn(t0, 0, 10, {{1, 0}, {2, 0}});
  Txn(t0, 20, 30, {{1, w1[0]}, {2, w1[1]}});
  // An audit that began after the second transfer committed, and saw the first's balances.
  Txn(t1, 40, 50, {{1, w1[0], false}, {2, w1[1], false}});
  const HistoryCheck check = CheckThreads({&t0, &t1});
  EXPECT_FALSE(check.ok);
  EXPECT_EQ(check.anomaly_counts.count("G-realtime"), 1u) << Described(check);
  // The same audit overlapping the transfer is fine: it may come first.
  ThreadHistory u0(kNonce, 0, 100), u1(kNonce, 1, 100);
  const auto v1 = Txn(u0, 0, 10, {{1, 0}, {2, 0}});
  Txn(u0, 20, 30, {{1, v1[0]}, {2, v1[1]}});
  Txn(u1, 25, 50, {{1, v1[0], false}, {2, v1[1], false}});
  EXPECT_TRUE(CheckThreads({&u0, &u1}).ok);
}

TEST(ConvertHistory, AnAuditThatSawHalfATransferIsReadSkew) {
  ThreadHistory t0(kNonce, 0, 100), t1(kNonce, 1, 100);
  const auto w1 = Txn(t0, 0, 10, {{1, 0}, {2, 0}});
  const auto w2 = Txn(t0, 20, 60, {{1, w1[0]}, {2, w1[1]}});
  Txn(t1, 15, 70, {{1, w2[0], false}, {2, w1[1], false}});  // account 1 after the transfer, account 2 before
  const HistoryCheck check = CheckThreads({&t0, &t1});
  EXPECT_FALSE(check.ok);
  EXPECT_EQ(check.anomaly_counts.count("G-single"), 1u) << Described(check);
}

TEST(ConvertHistory, TagsNobodyWroteAreGarbage) {
  ThreadHistory t0(kNonce, 0, 100);
  const auto w1 = Txn(t0, 0, 10, {{1, 0}});
  ThreadHistory other_run(kNonce + 1, 0, 0);
  const uint64_t foreign = other_run.NewTag();
  const uint64_t unwritten = ThreadHistory(kNonce, 0, 0).NewTag() + 1000;  // thread 0 never got that far
  Txn(t0, 20, 30, {{2, 0, false}, {2, foreign, false}});                   // two values from before the run in one key
  Txn(t0, 40, 50, {{3, unwritten, false}});
  Txn(t0, 60, 70, {{3, w1[0], false}});  // written to account 1, read in account 3
  const HistoryCheck check = CheckThreads({&t0});
  EXPECT_FALSE(check.ok);
  EXPECT_EQ(check.anomaly_counts.at("garbage-element"), 3u) << Described(check);
  EXPECT_TRUE(Mentions(check, "no recorded write made it")) << Described(check);
  EXPECT_TRUE(Mentions(check, "wrote it to a1")) << Described(check);
}

TEST(ConvertHistory, AReadOfAnAbortedWriteIsG1a) {
  ThreadHistory t0(kNonce, 0, 100), t1(kNonce, 1, 100);
  const auto aborted = Txn(t0, 0, 10, {{1, 0}}, Status::Aborted("conflict"));
  Txn(t1, 20, 30, {{1, aborted[0], false}});
  const HistoryCheck check = CheckThreads({&t0, &t1});
  EXPECT_FALSE(check.ok);
  EXPECT_EQ(check.anomaly_counts.count("G1a"), 1u) << Described(check);
}

TEST(ConvertHistory, AfterACutReadsOfUnrecordedWritesAreDroppedNotReported) {
  std::atomic<int64_t> budget{2};
  ThreadHistory t0(kNonce, 0, 100, &budget), t1(kNonce, 1, 100, &budget);
  Txn(t0, 0, 10, {{1, 0}});
  // t1's transaction starts, recorded, and runs long; t0's next is past the budget, unrecorded: it writes account 1,
  // which t1 reads.
  t1.BeginTransaction();
  t1.BeginAttempt(20);
  t0.BeginTransaction();  // the budget is spent: not recorded
  EXPECT_FALSE(t0.recording());
  const uint64_t unrecorded = t0.NewTag();
  t1.Read(1, unrecorded);
  t1.Read(2, 0);
  const uint64_t w2 = t1.NewTag();
  t1.Wrote(2, w2);
  t1.EndTransaction(Status::OK(), 60);
  ASSERT_EQ(t1.recorded_txns(), 1u);
  const ConvertedHistory converted = ConvertHistory({&t0, &t1}, Name);
  EXPECT_TRUE(converted.cut);
  EXPECT_EQ(converted.dropped, 1u);
  EXPECT_TRUE(converted.anomalies.empty());
  const HistoryCheck check = CheckThreads({&t0, &t1});
  EXPECT_TRUE(check.ok) << Described(check);
  EXPECT_TRUE(check.cut);
  EXPECT_EQ(check.checked_txns, 1u);
}

TEST(ConvertHistory, AHotKeyIsLinear) {
  // 300,000 read-modify-writes of one account over three threads, and audits of it: the lists are shared.
  constexpr int kTxns = 300'000;
  ThreadHistory t[3] = {{kNonce, 0, kTxns}, {kNonce, 1, kTxns}, {kNonce, 2, kTxns}};
  uint64_t tag = 0;
  for (int i = 0; i < kTxns; ++i) {
    tag = Txn(t[i % 3], 10 * i, 10 * i + 5, {{1, tag}, {2 + static_cast<uint64_t>(i % 1000), 0, false}})[0];
  }
  const auto start = std::chrono::steady_clock::now();
  const HistoryCheck check = CheckThreads({&t[0], &t[1], &t[2]});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(check.ok) << Described(check);
  EXPECT_EQ(check.checked_txns, static_cast<size_t>(kTxns));
  std::printf("300k read-modify-writes of one key converted and checked in %.2f s\n", seconds);
  EXPECT_LT(seconds, 20.0);
}

// --- The workloads' loop (RunTxnBench) against fake stores. ---

// A store in a std::map. Isolated: one lock held for each whole transaction, whose writes apply at its commit (so
// transactions run one at a time: serializable). Not isolated: every read and write of a transaction goes straight
// to the map (under a lock per operation, for memory's sake only), and nothing is ever a conflict.
class FakeStore final : public Store {
 public:
  explicit FakeStore(bool isolated) : isolated_(isolated) {}
  StatusOr<std::unique_ptr<StoreSession>> NewSession() override;
  Client::Stats stats() const override { return {}; }

  void Load(const std::string& key, const std::string& value) { data_[key] = value; }
  bool isolated() const { return isolated_; }

  Status Get(std::string_view key, std::string* value) {
    std::lock_guard lock(map_mu_);
    const auto it = data_.find(std::string(key));
    if (it == data_.end()) return Status::NotFound("no such key");
    *value = it->second;
    return Status::OK();
  }
  void Put(std::string_view key, std::string_view value) {
    std::lock_guard lock(map_mu_);
    data_[std::string(key)] = value;
  }
  void Scan(std::string_view start, size_t limit, std::vector<std::pair<std::string, std::string>>* out) {
    std::lock_guard lock(map_mu_);
    for (auto it = data_.lower_bound(std::string(start)); it != data_.end() && limit > 0; ++it, --limit) {
      out->emplace_back(it->first, it->second);
    }
  }
  void ScanReverse(std::string_view before, size_t limit, std::vector<std::pair<std::string, std::string>>* out) {
    std::lock_guard lock(map_mu_);
    auto it = before.empty() ? data_.end() : data_.lower_bound(std::string(before));
    for (; it != data_.begin() && limit > 0; --limit) {
      --it;
      out->emplace_back(it->first, it->second);
    }
  }
  std::mutex& txn_mu() { return txn_mu_; }

 private:
  const bool isolated_;
  std::mutex txn_mu_;
  std::mutex map_mu_;
  std::map<std::string, std::string> data_;
};

class FakeTxnOps final : public TxnOps {
 public:
  explicit FakeTxnOps(FakeStore& store) : store_(store) {}
  Status Get(std::string_view key, std::string* value) override {
    if (const auto it = writes_.find(std::string(key)); it != writes_.end()) {
      *value = it->second;
      return Status::OK();
    }
    Yield();
    return store_.Get(key, value);
  }
  Status Put(std::string_view key, std::string_view value) override {
    Yield();
    if (store_.isolated()) {
      writes_[std::string(key)] = value;
    } else {
      store_.Put(key, value);
    }
    return Status::OK();
  }
  Status Scan(std::string_view start, size_t limit, std::vector<std::pair<std::string, std::string>>* out) override {
    const size_t first = out->size();
    store_.Scan(start, limit, out);
    for (size_t i = first; i < out->size(); ++i) {  // read-only in the bank: own writes only for completeness
      if (const auto it = writes_.find((*out)[i].first); it != writes_.end()) (*out)[i].second = it->second;
    }
    return Status::OK();
  }
  void Commit() {
    for (const auto& [key, value] : writes_) store_.Put(key, value);
  }

 private:
  // Not isolated: give other threads a chance to come in between (the lost updates it lets through).
  void Yield() {
    if (!store_.isolated()) std::this_thread::yield();
  }
  FakeStore& store_;
  std::map<std::string, std::string> writes_;
};

class FakeSession final : public StoreSession {
 public:
  explicit FakeSession(FakeStore& store) : store_(store) {}
  void Get(std::string_view key, GetDone done) override {
    std::string value;
    const Status s = store_.Get(key, &value);
    done(s, value);
  }
  void Put(std::string_view key, std::string_view value, bool, PutDone done) override {
    store_.Put(key, value);
    done(Status::OK());
  }
  Status Scan(std::string_view start, size_t limit, std::vector<std::pair<std::string, std::string>>* out) override {
    store_.Scan(start, limit, out);
    return Status::OK();
  }
  Status ScanReverse(std::string_view before, size_t limit,
                     std::vector<std::pair<std::string, std::string>>* out) override {
    store_.ScanReverse(before, limit, out);
    return Status::OK();
  }
  void Flush() override {}
  bool completes_in_caller() const override { return false; }
  void AwaitCompletion() override {}
  void Progress() override {}
  void WaitUntil(Clock::time_point until) override { std::this_thread::sleep_until(until); }
  Status status() const override { return Status::OK(); }
  Status RunTransaction(const TxnBody& body, int* attempts) override {
    *attempts = 1;
    std::unique_lock lock(store_.txn_mu(), std::defer_lock);
    if (store_.isolated()) lock.lock();
    FakeTxnOps txn(store_);
    CELL_RETURN_IF_ERROR(body(txn));
    txn.Commit();
    return Status::OK();
  }

 private:
  FakeStore& store_;
};

StatusOr<std::unique_ptr<StoreSession>> FakeStore::NewSession() {
  return std::unique_ptr<StoreSession>(std::make_unique<FakeSession>(*this));
}

struct BenchRun {
  int status = -1;
  std::string json;
};

// RunTxnBench as cell-bench runs it, on 4 threads for `seconds`, over `keys` keys loaded first.
BenchRun RunBench(FakeStore& store, const std::string& workload, uint64_t keys, double seconds,
                  uint64_t check_max_txns = 1'000'000) {
  TxnBenchOptions options;
  options.workload = workload;
  options.keys = keys;
  options.distribution = Distribution::kUniform;
  options.threads = 4;
  options.seconds = seconds;
  options.audit_fraction = 0.2;
  options.audit_span = 4;
  options.check_max_txns = check_max_txns;
  options.key_of = [](uint64_t i) { return "k" + std::to_string(1000 + i); };
  options.value_of = [](const std::string& key, uint64_t version) { return key + "#" + std::to_string(version); };
  options.belongs = [](std::string_view value, std::string_view key) {
    return value.size() > key.size() && value.substr(0, key.size()) == key && value[key.size()] == '#';
  };
  const Bank bank(keys, options.initial_balance);
  for (uint64_t i = 0; i < keys; ++i) {
    if (workload == "bank") {
      store.Load(bank.Key(i), bank.InitialValue());
    } else {
      store.Load(options.key_of(i), options.value_of(options.key_of(i), 0));
    }
  }
  std::vector<std::unique_ptr<StoreSession>> sessions;
  for (int t = 0; t < options.threads; ++t) {
    auto session = store.NewSession();
    sessions.push_back(std::move(*session));
  }
  Hogs hogs({});
  BenchRun run;
  testing::internal::CaptureStdout();
  run.status = RunTxnBench(options, store, sessions, hogs, nullptr, "\"bench\":\"test\"");
  run.json = testing::internal::GetCapturedStdout();
  return run;
}

bool Has(const BenchRun& run, const std::string& field) { return run.json.find(field) != std::string::npos; }

TEST(TxnBench, TheBankOnAnIsolatedStorePassesTheCheck) {
  FakeStore store(/*isolated=*/true);
  const BenchRun run = RunBench(store, "bank", 10, 0.5);
  EXPECT_EQ(run.status, 0) << run.json;
  EXPECT_TRUE(Has(run, "\"invariant_ok\":true")) << run.json;
  EXPECT_TRUE(Has(run, "\"checker\":\"ok\"")) << run.json;
  EXPECT_TRUE(Has(run, "\"check_complete\":true")) << run.json;
  EXPECT_FALSE(Has(run, "\"anomalies\"")) << run.json;
}

TEST(TxnBench, TheBankOnAStoreWithoutIsolationFailsTheCheck) {
  FakeStore store(/*isolated=*/false);
  const BenchRun run = RunBench(store, "bank", 10, 0.5);
  EXPECT_EQ(run.status, 1) << run.json;
  EXPECT_TRUE(Has(run, "\"checker\":\"failed\"")) << run.json;
  EXPECT_TRUE(Has(run, "\"anomalies\":[\"")) << run.json;
  EXPECT_TRUE(Has(run, "lost update")) << run.json;
  std::printf("%s", run.json.c_str());
}

TEST(TxnBench, TxnMixOnAnIsolatedStorePassesTheCheck) {
  FakeStore store(/*isolated=*/true);
  const BenchRun run = RunBench(store, "txn-mix", 10, 0.5);
  EXPECT_EQ(run.status, 0) << run.json;
  EXPECT_TRUE(Has(run, "\"checker\":\"ok\"")) << run.json;
}

TEST(TxnBench, TxnMixOnAStoreWithoutIsolationFailsTheCheck) {
  FakeStore store(/*isolated=*/false);
  const BenchRun run = RunBench(store, "txn-mix", 10, 0.5);
  EXPECT_EQ(run.status, 1) << run.json;
  EXPECT_TRUE(Has(run, "\"checker\":\"failed\"")) << run.json;
}

TEST(TxnBench, ACutHistoryStillPassesOnAnIsolatedStore) {
  FakeStore store(/*isolated=*/true);
  const BenchRun run = RunBench(store, "bank", 10, 0.5, /*check_max_txns=*/500);
  EXPECT_EQ(run.status, 0) << run.json;
  EXPECT_TRUE(Has(run, "\"checker\":\"ok\"")) << run.json;
  EXPECT_TRUE(Has(run, "\"check_complete\":false")) << run.json;
}

TEST(TxnBench, WithoutTheCheckNothingIsChecked) {
  FakeStore store(/*isolated=*/false);
  const BenchRun run = [&] {
    // As RunBench, with the check off: the broken store's anomalies go unseen, the invariant may still break.
    TxnBenchOptions o;
    o.workload = "txn-mix";
    o.keys = 10;
    o.threads = 2;
    o.seconds = 0.2;
    o.check = false;
    o.key_of = [](uint64_t i) { return "k" + std::to_string(1000 + i); };
    o.value_of = [](const std::string& key, uint64_t) { return key + "#"; };
    o.belongs = [](std::string_view, std::string_view) { return true; };
    for (uint64_t i = 0; i < o.keys; ++i) store.Load(o.key_of(i), o.value_of(o.key_of(i), 0));
    std::vector<std::unique_ptr<StoreSession>> sessions;
    for (int t = 0; t < o.threads; ++t) {
      auto session = store.NewSession();
      sessions.push_back(std::move(*session));
    }
    Hogs hogs({});
    BenchRun r;
    testing::internal::CaptureStdout();
    r.status = RunTxnBench(o, store, sessions, hogs, nullptr, "\"bench\":\"test\"");
    r.json = testing::internal::GetCapturedStdout();
    return r;
  }();
  EXPECT_EQ(run.status, 0) << run.json;
  EXPECT_TRUE(Has(run, "\"checker\":\"not run\"")) << run.json;
  EXPECT_FALSE(Has(run, "checked_txns")) << run.json;
}

}  // namespace
}  // namespace cell::bench
