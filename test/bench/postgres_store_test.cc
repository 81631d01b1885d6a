// cell-bench's PostgreSQL store against a PostgreSQL of the test's own (bench/private_postgres.h: a temporary
// directory, a Unix socket there only, as the `postgres` user when the test runs as root): plain operations in the
// keys' byte order, transactions that see their own writes and write nothing when they fail, a serialization
// conflict that is retried, the bank's total under concurrent transfers and audits, and the private server's
// settings, its end and what a session says then.
#include "bench/postgres_store.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench/private_postgres.h"
#include "bench/txn_workload.h"
#include "test/bench/bank_stress.h"

namespace cell::bench {
namespace {

using Pairs = std::vector<std::pair<std::string, std::string>>;

class PostgresStoreTest : public testing::Test {
 protected:
  void SetUp() override {
    PrivatePostgresOptions options;
    options.durability = "off";  // nothing here needs to survive a crash
    auto server = PrivatePostgres::Start(options);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(*server);
    auto store = PostgresStore::Open(server_->conninfo());
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(*store);
    auto session = store_->NewSession();
    ASSERT_TRUE(session.ok()) << session.status().ToString();
    session_ = std::move(*session);
  }

  // A synchronous session: the callback has run when Put or Get returns.
  Status Put(std::string_view key, std::string_view value) {
    Status result = Status::Internal("the callback did not run");
    session_->Put(key, value, /*insert=*/true, [&](const Status& s) { result = s; });
    return result;
  }
  Status Get(std::string_view key, std::string* value) {
    Status result = Status::Internal("the callback did not run");
    session_->Get(key, [&](const Status& s, std::string_view v) {
      result = s;
      if (s.ok()) value->assign(v);
    });
    return result;
  }

  std::unique_ptr<PrivatePostgres> server_;
  std::unique_ptr<PostgresStore> store_;
  std::unique_ptr<StoreSession> session_;
};

TEST_F(PostgresStoreTest, PutsGetsAndScansFollowTheKeysBytes) {
  EXPECT_TRUE(session_->completes_in_caller());
  // Bytes a text column's collation would order otherwise (case, a high byte), and a zero byte in a value.
  const std::vector<std::string> keys = {"B", "a", "ab", std::string("a\xff", 2), std::string("a\0b", 3), "b"};
  for (const std::string& k : keys) ASSERT_TRUE(Put(k, "value of " + k + std::string(1, '\0')).ok()) << k;
  std::string value;
  ASSERT_TRUE(Get("ab", &value).ok());
  EXPECT_EQ(value, std::string("value of ab\0", 12));
  EXPECT_TRUE(Get("abc", &value).IsNotFound());
  ASSERT_TRUE(Put("ab", "replaced").ok());
  ASSERT_TRUE(Get("ab", &value).ok());
  EXPECT_EQ(value, "replaced");

  Pairs pairs;
  ASSERT_TRUE(session_->Scan("", 100, &pairs).ok());  // an empty start key is not SQL's NULL
  std::vector<std::string> order;
  for (const auto& [k, v] : pairs) order.push_back(k);
  EXPECT_EQ(order, (std::vector<std::string>{"B", "a", std::string("a\0b", 3), "ab", std::string("a\xff", 2), "b"}));
  pairs.clear();
  ASSERT_TRUE(session_->Scan("ab", 2, &pairs).ok());
  ASSERT_EQ(pairs.size(), 2u);
  EXPECT_EQ(pairs[0], std::make_pair(std::string("ab"), std::string("replaced")));
  EXPECT_EQ(pairs[1].first, std::string("a\xff", 2));
}

TEST_F(PostgresStoreTest, ATransactionSeesItsOwnWritesAndAFailedOneWritesNothing) {
  ASSERT_TRUE(Put("k1", "old").ok());
  int attempts = 0;
  Status s = session_->RunTransaction(
      [&](TxnOps& txn) -> Status {
        CELL_RETURN_IF_ERROR(txn.Put("k1", "new"));
        CELL_RETURN_IF_ERROR(txn.Put("k2", "inserted"));
        std::string v;
        CELL_RETURN_IF_ERROR(txn.Get("k1", &v));
        if (v != "new") return Status::Internal("the transaction's own write is not seen: " + v);
        Pairs pairs;
        CELL_RETURN_IF_ERROR(txn.Scan("k", 10, &pairs));
        if (pairs.size() != 2 || pairs[1].second != "inserted") return Status::Internal("the scan missed a write");
        return Status::FailedPrecondition("the body gives up");
      },
      &attempts);
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition) << s.ToString();
  EXPECT_EQ(s.message(), "the body gives up");
  EXPECT_EQ(attempts, 1) << "only a conflict is run again";
  std::string value;
  ASSERT_TRUE(Get("k1", &value).ok());
  EXPECT_EQ(value, "old");
  EXPECT_TRUE(Get("k2", &value).IsNotFound());

  // The session goes on: the same body committing this time.
  s = session_->RunTransaction([&](TxnOps& txn) { return txn.Put("k2", "committed"); }, &attempts);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_TRUE(Get("k2", &value).ok());
  EXPECT_EQ(value, "committed");
  // An SQL error inside a transaction fails it (not retried) and leaves the session usable.
  std::string too_long;  // a key the primary key's btree cannot hold: over 2704 bytes even compressed
  std::mt19937 rng(1);
  while (too_long.size() < 10000) too_long.push_back(static_cast<char>(rng()));
  s = session_->RunTransaction([&](TxnOps& txn) { return txn.Put(too_long, "v"); }, &attempts);
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition) << s.ToString();
  EXPECT_EQ(attempts, 1);
  EXPECT_TRUE(session_->status().ok());
  ASSERT_TRUE(Get("k1", &value).ok());
}

TEST_F(PostgresStoreTest, TwoTransfersThatReadBeforeEitherWritesConflictAndBothCommit) {
  const Bank bank(4);
  ASSERT_TRUE(LoadInTransactions(*session_, bank.accounts(), [&](uint64_t i) {
                return std::make_pair(bank.Key(i), bank.InitialValue());
              }).ok());
  const ForcedConflictResult r = RunForcedConflict(*store_, bank);
  ASSERT_TRUE(r.first.ok()) << r.first.ToString();
  ASSERT_TRUE(r.second.ok()) << r.second.ToString();
  EXPECT_GE(r.attempts[0] + r.attempts[1], 3) << "one of them must have hit a serialization failure and run again";
  // Both transfers, not one of them twice or one lost.
  EXPECT_EQ(r.a, "998");
  EXPECT_EQ(r.b, "1002");
}

TEST_F(PostgresStoreTest, ConcurrentTransfersAndAuditsKeepTheTotal) {
  const Bank bank(20);
  ASSERT_TRUE(LoadInTransactions(*session_, bank.accounts(), [&](uint64_t i) {
                return std::make_pair(bank.Key(i), bank.InitialValue());
              }).ok());
  const BankStressResult r = RunBankStress(*store_, bank, 150);
  for (const std::string& e : r.errors) ADD_FAILURE() << e;
  ASSERT_TRUE(r.final_total.has_value());
  EXPECT_EQ(*r.final_total, bank.expected_total());
  EXPECT_TRUE(r.check.ok) << r.check.summary;
  EXPECT_GT(r.check.checked_txns, r.committed);  // the final total too
  EXPECT_EQ(r.committed, 4u * 150);
  EXPECT_GT(r.audits, 0u);
  EXPECT_GT(r.aborts, 0u) << "two threads on the same two accounts never conflicted";
}

TEST(PrivatePostgres, StartsWithTheDurabilityAskedAndRemovesItselfWhenStopped) {
  PrivatePostgresOptions options;
  options.durability = "async";
  auto server = PrivatePostgres::Start(options);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const std::string dir = (*server)->dir();
  const pid_t pid = (*server)->pid();
  ASSERT_GT(pid, 0);
  EXPECT_TRUE(std::filesystem::exists(dir + "/data/PG_VERSION"));
  auto store = PostgresStore::Open((*server)->conninfo());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const auto show = [&](std::string_view name) {
    auto value = (*store)->Show(name);
    return value.ok() ? *value : value.status().ToString();
  };
  EXPECT_EQ(show("fsync"), "on");
  EXPECT_EQ(show("synchronous_commit"), "off");
  EXPECT_EQ(show("full_page_writes"), "on");
  EXPECT_EQ(show("listen_addresses"), "");
  EXPECT_TRUE((*store)->Show("fsync; DROP TABLE kv").status().IsInvalidArgument());
  auto session = (*store)->NewSession();
  ASSERT_TRUE(session.ok()) << session.status().ToString();

  ASSERT_TRUE((*server)->Stop().ok());
  EXPECT_FALSE(std::filesystem::exists(dir));
  EXPECT_EQ((*server)->pid(), -1);
  EXPECT_NE(kill(pid, 0), 0) << "the postmaster was reaped";
  // A session whose server went away says so, and fails everything after.
  Status got;
  (*session)->Get("k", [&](const Status& s, std::string_view) { got = s; });
  EXPECT_TRUE(got.IsUnavailable()) << got.ToString();
  EXPECT_FALSE((*session)->status().ok());
  int attempts = -1;
  EXPECT_TRUE((*session)->RunTransaction([](TxnOps&) { return Status::OK(); }, &attempts).IsUnavailable());
  EXPECT_EQ(attempts, 0);
  auto again = (*store)->NewSession();
  EXPECT_TRUE(again.status().IsUnavailable()) << again.status().ToString();
  EXPECT_TRUE((*server)->Stop().ok()) << "stopping twice is nothing";
}

TEST(PrivatePostgres, RefusesWhatItCannotDo) {
  PrivatePostgresOptions options;
  options.durability = "fast";
  EXPECT_TRUE(PrivatePostgres::Start(options).status().IsInvalidArgument());
  options.durability = "sync";
  options.bin_dir = "/nonexistent";
  auto missing = PrivatePostgres::Start(options);
  EXPECT_EQ(missing.status().code(), Status::Code::kFailedPrecondition) << missing.status().ToString();
  auto refused = PostgresStore::Open("host=/nonexistent-cell-dir port=5432 user=cell dbname=postgres");
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(refused.status().IsUnavailable()) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("cannot connect to postgres"), std::string::npos);
}

}  // namespace
}  // namespace cell::bench
