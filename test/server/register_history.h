// Recording register histories through the public client, for the linearizability checker (test/linearizability.h).
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "cell/client.h"
#include "test/linearizability.h"

namespace cell::testing {

// One client thread's part of a history on the keys lin0..lin5: `count` random puts (of values unique to the
// thread), gets and deletes, each recorded with the times `now` gives at its call and its return.
inline void RecordRegisterOps(Client& client, int thread, int count, const std::function<uint64_t()>& now,
                              std::vector<RegisterOp>* out) {
  std::mt19937_64 rng(100 + thread);
  for (int i = 0; i < count; ++i) {
    RegisterOp op;
    op.key = fmt::format("lin{}", rng() % 6);
    const int kind = static_cast<int>(rng() % 3);
    op.call = now();
    if (kind == 0) {
      op.kind = RegisterOp::Kind::kPut;
      op.value = fmt::format("t{}-{}", thread, i);
      Status s = client.Put(op.key, op.value);
      ASSERT_TRUE(s.ok()) << s.ToString();
    } else if (kind == 1) {
      op.kind = RegisterOp::Kind::kGet;
      Status s = client.Get(op.key, &op.value);
      ASSERT_TRUE(s.ok() || s.IsNotFound()) << s.ToString();
      op.found = s.ok();
    } else {
      op.kind = RegisterOp::Kind::kDelete;
      Status s = client.Delete(op.key);
      ASSERT_TRUE(s.ok() || s.IsNotFound()) << s.ToString();
      op.found = s.ok();
    }
    op.ret = now();
    out->push_back(std::move(op));
  }
}

// A history during meganode splits: three clients, by server-side, client-side and mixed search (`open` makes one
// for a search mode), record `per_thread` operations each on lin0..lin5, while a filler puts other keys among them so
// that the meganodes holding them split.
inline std::vector<RegisterOp> RecordHistoryDuringSplits(
    const std::function<std::unique_ptr<Client>(const char* search)>& open, int per_thread) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  const std::function<uint64_t()> now = [&] { return static_cast<uint64_t>((Clock::now() - t0).count()); };
  std::mutex history_mu;
  std::vector<RegisterOp> history;
  std::atomic<bool> stop_filling{false};
  std::thread filler([&] {
    auto client = open("server");
    ASSERT_NE(client, nullptr);
    for (int i = 0; !stop_filling.load(); ++i) {
      Status s = client->Put(fmt::format("lin{}-fill{:06d}", i % 6, i), std::string(50, 'f'));
      ASSERT_TRUE(s.ok()) << s.ToString();
    }
  });
  std::vector<std::thread> threads;
  const char* searches[] = {"server", "client", "fixed:0.5"};
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      auto client = open(searches[t]);
      ASSERT_NE(client, nullptr);
      std::vector<RegisterOp> mine;
      RecordRegisterOps(*client, t, per_thread, now, &mine);
      std::lock_guard lock(history_mu);
      history.insert(history.end(), mine.begin(), mine.end());
    });
  }
  for (auto& t : threads) t.join();
  stop_filling = true;
  filler.join();
  return history;
}

}  // namespace cell::testing
