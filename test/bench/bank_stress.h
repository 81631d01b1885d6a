// The bank workload's transactions (bench/txn_workload.h) under contention, for the store tests
// (test/bench/postgres_store_test.cc, redis_store_test.cc): what any store's RunTransaction must give them.
//   RunBankStress       threads that transfer between the same two accounts in opposite directions, and threads
//                       that transfer between random accounts and audit every account (each audit must find the
//                       exact total), then the final total, and the serializability check of what they all did
//                       (bench/txn_history.h).
//   RunForcedConflict   two transfers between the same two accounts that both read before either writes (a barrier
//                       in their first attempts), so that at least one must conflict and run again.
#pragma once

#include <atomic>
#include <barrier>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench/store.h"
#include "bench/txn_history.h"
#include "bench/txn_workload.h"

namespace cell::bench {

struct BankStressResult {
  std::optional<int64_t> final_total;  // the bank's Total after the threads, if it could be read
  uint64_t committed = 0, aborts = 0, audits = 0;
  std::vector<std::string> errors;  // failed transactions and audits that found another total
  HistoryCheck check;               // of the threads' transactions and the final total
};

// `bank` loaded already; `per_thread` transactions on each of 4 threads, each on a session of its own.
inline BankStressResult RunBankStress(Store& store, const Bank& bank, int per_thread) {
  BankStressResult result;
  std::mutex mu;
  std::atomic<uint64_t> committed{0}, aborts{0}, audits{0};
  const auto fail = [&](const std::string& what) {
    std::lock_guard lock(mu);
    if (result.errors.size() < 10) result.errors.push_back(what);
  };
  std::vector<std::unique_ptr<StoreSession>> sessions;
  for (int t = 0; t < 5; ++t) {
    auto session = store.NewSession();
    if (!session.ok()) {
      result.errors.push_back(session.status().ToString());
      return result;
    }
    sessions.push_back(std::move(*session));
  }
  const uint32_t nonce = NewRunNonce();
  std::vector<ThreadHistory> histories;
  for (int t = 0; t < 5; ++t) histories.emplace_back(nonce, t, per_thread + 1);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t + 1);
      StoreSession& session = *sessions[t];
      ThreadHistory* history = &histories[t];
      for (int i = 0; i < per_thread; ++i) {
        int attempts = 0;
        Status s;
        if (t >= 2 && i % 5 == 0) {  // an audit of every account
          int64_t sum = 0;
          s = bank.Audit(session, 0, bank.accounts(), &sum, &attempts, history);
          if (s.ok()) audits.fetch_add(1);
          if (s.ok() && sum != bank.expected_total()) {
            fail("an audit found " + std::to_string(sum) + ", not " + std::to_string(bank.expected_total()));
          }
        } else {
          // Threads 0 and 1: accounts 0 and 1, in opposite directions; 2 and 3: any two.
          uint64_t from = t == 0 ? 0 : 1, to = 1 - from;
          if (t >= 2) {
            from = rng() % bank.accounts();
            to = (from + 1 + rng() % (bank.accounts() - 1)) % bank.accounts();
          }
          bool skipped = false;
          s = bank.Transfer(session, from, to, 1 + static_cast<int64_t>(rng() % 10), &attempts, &skipped, history);
        }
        aborts.fetch_add(attempts > 0 ? attempts - 1 : 0);
        if (s.ok()) {
          committed.fetch_add(1);
        } else {
          fail(s.ToString());
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  result.committed = committed.load();
  result.aborts = aborts.load();
  result.audits = audits.load();
  int64_t total = 0;
  if (Status s = bank.Total(*sessions[4], &total, &histories[4]); s.ok()) {
    result.final_total = total;
  } else {
    result.errors.push_back("final audit: " + s.ToString());
  }
  std::vector<const ThreadHistory*> all;
  for (const ThreadHistory& history : histories) all.push_back(&history);
  result.check = CheckHistory(all, [&bank](uint64_t i) { return bank.Key(i); });
  return result;
}

struct ForcedConflictResult {
  Status first, second;      // the two transfers' outcomes
  int attempts[2] = {0, 0};  // how many times each body ran
  std::string a, b;          // accounts 0 and 1 afterwards, read by a third session
};

// Two transfers of 1 from account 0 to account 1 of `bank` (loaded already), each on a session of its own, whose
// first attempts both read both balances before either writes.
inline ForcedConflictResult RunForcedConflict(Store& store, const Bank& bank) {
  ForcedConflictResult r;
  std::vector<std::unique_ptr<StoreSession>> sessions;
  for (int t = 0; t < 3; ++t) {
    auto session = store.NewSession();
    if (!session.ok()) {
      r.first = session.status();
      return r;
    }
    sessions.push_back(std::move(*session));
  }
  std::barrier both_read(2);
  const std::string from = bank.Key(0), to = bank.Key(1);
  const auto transfer = [&](int t) {
    bool first_attempt = true;
    return sessions[t]->RunTransaction(
        [&](TxnOps& txn) -> Status {
          std::string x, y;
          CELL_RETURN_IF_ERROR(txn.Get(from, &x));
          CELL_RETURN_IF_ERROR(txn.Get(to, &y));
          if (first_attempt) {  // later attempts run alone: the other may be done
            first_attempt = false;
            both_read.arrive_and_wait();
          }
          CELL_RETURN_IF_ERROR(txn.Put(from, std::to_string(std::stoll(x) - 1)));
          return txn.Put(to, std::to_string(std::stoll(y) + 1));
        },
        &r.attempts[t]);
  };
  std::thread other([&] { r.second = transfer(1); });
  r.first = transfer(0);
  other.join();
  int done = 0;
  sessions[2]->Get(from, [&](const Status& s, std::string_view v) { r.a = s.ok() ? std::string(v) : s.ToString(); });
  sessions[2]->Get(to, [&](const Status& s, std::string_view v) {
    r.b = s.ok() ? std::string(v) : s.ToString();
    ++done;
  });
  for (int waits = 0; done == 0 && waits < 100000; ++waits) sessions[2]->AwaitCompletion();
  return r;
}

}  // namespace cell::bench
