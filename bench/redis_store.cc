// cell-bench's Redis store over hiredis (see redis_store.h). hiredis formats the commands and parses the replies
// (redisFormatCommandArgv, redisBufferRead, redisGetReplyFromReader); this file sends, waits and matches replies to
// operations.
#include "bench/redis_store.h"

#include <errno.h>
#include <fmt/format.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <deque>
#include <map>
#include <thread>
#include <vector>

namespace cell::bench {

std::string RedisAddress::ToString() const {
  if (host.empty()) return "unix:" + unix_path;
  if (host.find(':') != std::string::npos) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

StatusOr<RedisAddress> ParseRedisAddress(std::string_view text) {
  const auto bad = [&](std::string_view why) {
    return Status::InvalidArgument(
        fmt::format("redis address '{}' {}: want HOST:PORT, [IPV6]:PORT or unix:/path", text, why));
  };
  RedisAddress a;
  if (text.substr(0, 5) == "unix:") {
    a.unix_path = std::string(text.substr(5));
    if (a.unix_path.empty()) return bad("has no socket path");
    return a;
  }
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return bad("has no host and port");
  std::string_view host = text.substr(0, colon), port = text.substr(colon + 1);
  if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') return bad("has an unclosed bracket");
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string_view::npos) {
    return bad("needs brackets round an IPv6 host");
  }
  const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), a.port);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() || a.port < 1 || a.port > 65535) {
    return bad("has no port in 1..65535");
  }
  a.host = std::string(host);
  return a;
}

namespace {

using Clock = std::chrono::steady_clock;

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;
struct ContextDeleter {
  void operator()(redisContext* c) const { redisFree(c); }
};
using ContextPtr = std::unique_ptr<redisContext, ContextDeleter>;

std::string_view Text(const redisReply* r) { return {r->str, r->len}; }

class RedisSession final : public StoreSession {
 public:
  RedisSession(ContextPtr context, std::string address, std::chrono::milliseconds timeout)
      : c_(std::move(context)), address_(std::move(address)), timeout_(timeout) {}
  // Operations still pending complete now, with Unavailable (the harness drains its windows first).
  ~RedisSession() override { Fail(Status::Unavailable(fmt::format("redis at {}: session closed", address_))); }

  void Get(std::string_view key, GetDone done) override {
    if (!failed_.ok()) return done(failed_, {});
    const std::string_view args[] = {"GET", key};
    if (!Append(args, 2)) return done(failed_, {});
    pending_.push_back({Pending::kGet, "GET", std::move(done), nullptr, nullptr});
  }

  void Put(std::string_view key, std::string_view value, bool insert, PutDone done) override {
    if (!failed_.ok()) return done(failed_);
    const std::string_view set[] = {"SET", key, value};
    if (!Append(set, 3)) return done(failed_);
    if (insert) {
      // Two replies: SET's error, if any, is carried to ZADD's, which completes the put.
      const std::string_view zadd[] = {"ZADD", RedisStore::kKeySet, "0", key};
      if (!Append(zadd, 4)) return done(failed_);
      pending_.push_back({Pending::kFolded, "SET", nullptr, nullptr, nullptr});
      pending_.push_back({Pending::kPut, "ZADD", nullptr, std::move(done), nullptr});
    } else {
      pending_.push_back({Pending::kPut, "SET", nullptr, std::move(done), nullptr});
    }
  }

  Status Scan(std::string_view start, size_t limit, std::vector<std::pair<std::string, std::string>>* out) override {
    if (limit == 0) return failed_;
    std::string from = "[";  // inclusive (appended, not concatenated: GCC 12's false -Wrestrict, bug 105329)
    from.append(start);
    const std::string count = std::to_string(limit);
    const std::string_view range[] = {"ZRANGEBYLEX", RedisStore::kKeySet, from, "+", "LIMIT", "0", count};
    return RangeThenValues(range, out);
  }

  // The mirror image of Scan: ZREVRANGEBYLEX from below `before` (exclusive; "+" for no bound) down to "-", then MGET.
  Status ScanReverse(std::string_view before, size_t limit,
                     std::vector<std::pair<std::string, std::string>>* out) override {
    if (limit == 0) return failed_;
    std::string below = "+";
    if (!before.empty()) {
      below = "(";  // exclusive
      below.append(before);
    }
    const std::string count = std::to_string(limit);
    const std::string_view range[] = {"ZREVRANGEBYLEX", RedisStore::kKeySet, below, "-", "LIMIT", "0", count};
    return RangeThenValues(range, out);
  }

  // Sends the output buffer (blocking, bounded by the socket's send timeout).
  void Flush() override {
    while (failed_.ok() && sent_ < out_.size()) {
      const ssize_t n = send(c_->fd, out_.data() + sent_, out_.size() - sent_, MSG_NOSIGNAL);
      if (n >= 0) {
        sent_ += static_cast<size_t>(n);
      } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
        Fail(Status::DeadlineExceeded(
            fmt::format("redis at {}: could not send within {} ms", address_, timeout_.count())));
      } else if (errno != EINTR) {
        Fail(Status::Unavailable(fmt::format("redis at {}: connection lost: {}", address_, std::strerror(errno))));
      }
    }
    out_.clear();
    sent_ = 0;
  }

  bool completes_in_caller() const override { return true; }

  void AwaitCompletion() override {
    if (pending_.empty() || !failed_.ok()) return;
    const auto deadline = Clock::now() + timeout_;
    while (!Pump(deadline)) {
      if (Clock::now() >= deadline) {
        Fail(Status::DeadlineExceeded(fmt::format("redis at {}: no reply within {} ms", address_, timeout_.count())));
      }
    }
  }

  void Progress() override {
    if (!pending_.empty()) Pump(Clock::now());
  }

  void WaitUntil(Clock::time_point until) override {
    // With nothing pending this still watches the socket, so a server that goes away is noticed while idle.
    while (failed_.ok() && Clock::now() < until) Pump(until);
    if (!failed_.ok()) std::this_thread::sleep_until(until);
  }

  Status status() const override { return failed_; }

  Status RunTransaction(const TxnBody& body, int* attempts) override;

  // Sends the commands at once and waits for all their replies, in order (operations started before them complete
  // first). An error reply is returned like any other, for the caller to look at; only the session's failure fails
  // the call.
  StatusOr<std::vector<ReplyPtr>> Pipeline(const std::vector<std::vector<std::string_view>>& commands) {
    if (!failed_.ok()) return failed_;
    if (commands.empty()) return std::vector<ReplyPtr>();
    std::vector<Kept> kept(commands.size());  // sized once: the pending entries point into it
    for (size_t i = 0; i < commands.size(); ++i) {
      if (!Append(commands[i].data(), commands[i].size())) return failed_;  // Fail completed the entries pushed
      pending_.push_back({Pending::kKept, commands[i][0], nullptr, nullptr, &kept[i]});
    }
    Flush();
    while (!kept.back().done) AwaitCompletion();  // in order: the last one done, all are
    if (!failed_.ok()) return failed_;
    std::vector<ReplyPtr> replies;
    for (Kept& k : kept) replies.push_back(std::move(k.reply));
    return replies;
  }

  // Sends one command and waits for its reply (operations started before it complete first); an error reply is
  // FailedPrecondition.
  StatusOr<ReplyPtr> Command(const std::string_view* args, size_t n) {
    if (!failed_.ok()) return failed_;
    Kept kept;
    if (!Append(args, n)) return failed_;
    pending_.push_back({Pending::kKept, args[0], nullptr, nullptr, &kept});
    Flush();
    while (!kept.done) AwaitCompletion();  // a failure completes every pending entry, this one too
    if (!kept.reply) return failed_;
    if (kept.reply->type == REDIS_REPLY_ERROR) {
      return Status::FailedPrecondition(fmt::format("redis {}: {}", args[0], Text(kept.reply.get())));
    }
    return std::move(kept.reply);
  }

 private:
  // Where a synchronous command's reply goes.
  struct Kept {
    bool done = false;
    ReplyPtr reply;  // null if the session failed first
  };
  // One expected reply, in the order the commands went out.
  struct Pending {
    enum Kind { kGet, kPut, kFolded, kKept } kind;
    std::string_view command;  // a literal, for messages
    GetDone get;
    PutDone put;
    Kept* kept;
  };

  // A scan: `range` (7 arguments: ZRANGEBYLEX or ZREVRANGEBYLEX over the key set) names the keys, in its order, then
  // one MGET reads their values; the pairs are appended to *out in the range's order.
  Status RangeThenValues(const std::string_view (&range)[7], std::vector<std::pair<std::string, std::string>>* out) {
    auto keys = Command(range, 7);
    if (!keys.ok()) return keys.status();
    const redisReply& k = **keys;
    if (k.type != REDIS_REPLY_ARRAY) return Unexpected(range[0], k);
    if (k.elements == 0) return Status::OK();
    std::vector<std::string_view> mget = {"MGET"};
    mget.reserve(k.elements + 1);
    for (size_t i = 0; i < k.elements; ++i) {
      if (k.element[i]->type != REDIS_REPLY_STRING) return Unexpected(range[0], *k.element[i]);
      mget.push_back(Text(k.element[i]));
    }
    auto values = Command(mget.data(), mget.size());
    if (!values.ok()) return values.status();
    const redisReply& v = **values;
    if (v.type != REDIS_REPLY_ARRAY || v.elements != k.elements) return Unexpected("MGET", v);
    for (size_t i = 0; i < v.elements; ++i) {
      if (v.element[i]->type == REDIS_REPLY_NIL) {
        return Status::Corruption(fmt::format("redis at {}: scan: key '{}' is in {} but has no value", address_,
                                              mget[i + 1], RedisStore::kKeySet));
      }
      if (v.element[i]->type != REDIS_REPLY_STRING) return Unexpected("MGET", *v.element[i]);
      out->emplace_back(mget[i + 1], Text(v.element[i]));
    }
    return Status::OK();
  }

  Status Unexpected(std::string_view command, const redisReply& r) const {
    if (r.type == REDIS_REPLY_ERROR) return Status::FailedPrecondition(fmt::format("redis {}: {}", command, Text(&r)));
    return Status::Corruption(
        fmt::format("redis at {}: {} answered with a reply of type {}", address_, command, r.type));
  }

  // Formats a command onto the output buffer; false (the session failed) if hiredis could not.
  bool Append(const std::string_view* args, size_t n) {
    argv_.clear();
    lengths_.clear();
    for (size_t i = 0; i < n; ++i) {
      argv_.push_back(args[i].data());
      lengths_.push_back(args[i].size());
    }
    char* command = nullptr;
    const int length = redisFormatCommandArgv(&command, static_cast<int>(n), argv_.data(), lengths_.data());
    if (length < 0) {
      Fail(Status::Internal(fmt::format("redis at {}: cannot format {} (out of memory)", address_, args[0])));
      return false;
    }
    out_.append(command, static_cast<size_t>(length));
    redisFreeCommand(command);
    return true;
  }

  // Completes the operations whose replies hiredis's reader already holds; whether any did (or the session failed).
  bool TakeReplies() {
    bool any = false;
    while (failed_.ok() && !pending_.empty()) {
      void* reply = nullptr;
      if (redisGetReplyFromReader(c_.get(), &reply) != REDIS_OK) {
        Fail(Status::Unavailable(fmt::format("redis at {}: bad reply: {}", address_, c_->errstr)));
        return true;
      }
      if (reply == nullptr) break;
      Complete(ReplyPtr(static_cast<redisReply*>(reply)));
      any = true;
    }
    return any || !failed_.ok();
  }

  // Sends what is queued and completes what has come; if nothing has, waits for the socket until `until` (not at
  // all once it has passed) and reads once. Whether any operation completed (or the session failed).
  bool Pump(Clock::time_point until) {
    if (!failed_.ok()) return true;
    Flush();
    if (TakeReplies()) return true;
    pollfd p{c_->fd, POLLIN, 0};
    for (;;) {
      const auto left = std::max(Clock::duration::zero(), until - Clock::now());
      const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(left);
      const timespec wait{static_cast<time_t>(seconds.count()),
                          static_cast<long>(std::chrono::nanoseconds(left - seconds).count())};
      const int ready = ppoll(&p, 1, &wait, nullptr);
      if (ready < 0 && errno == EINTR) continue;
      if (ready < 0) {
        Fail(Status::Unavailable(fmt::format("redis at {}: poll: {}", address_, std::strerror(errno))));
        return true;
      }
      if (ready == 0) return false;
      // The socket is readable (data, end of file or an error): one read() does not block.
      if (redisBufferRead(c_.get()) != REDIS_OK) {
        Fail(Status::Unavailable(fmt::format("redis at {}: connection lost: {}", address_, c_->errstr)));
        return true;
      }
      return TakeReplies();
    }
  }

  void Complete(ReplyPtr reply) {
    Pending p = std::move(pending_.front());
    pending_.pop_front();
    Status s;
    if (reply->type == REDIS_REPLY_ERROR) {
      s = Status::FailedPrecondition(fmt::format("redis {}: {}", p.command, Text(reply.get())));
    }
    switch (p.kind) {
      case Pending::kFolded:
        if (!s.ok() && carried_.ok()) carried_ = std::move(s);
        return;
      case Pending::kPut:
        if (s.ok() && reply->type != REDIS_REPLY_STATUS && reply->type != REDIS_REPLY_INTEGER) {
          s = Unexpected(p.command, *reply);
        }
        if (!carried_.ok()) s = std::exchange(carried_, Status::OK());
        reply.reset();
        return p.put(s);
      case Pending::kGet:
        if (s.ok() && reply->type == REDIS_REPLY_NIL) s = Status::NotFound("redis GET: no such key");
        if (s.ok() && reply->type != REDIS_REPLY_STRING) s = Unexpected(p.command, *reply);
        return p.get(s, s.ok() ? Text(reply.get()) : std::string_view());
      case Pending::kKept:
        p.kept->reply = std::move(reply);
        p.kept->done = true;
        return;
    }
  }

  // Ends the session: every pending operation completes with `why`, and every later one at once.
  void Fail(Status why) {
    if (!failed_.ok()) return;
    failed_ = std::move(why);
    out_.clear();
    sent_ = 0;
    carried_ = Status::OK();
    std::deque<Pending> pending;
    pending.swap(pending_);  // callbacks may start operations: they complete at once, not into this list
    const Status s = failed_;
    for (Pending& p : pending) {
      switch (p.kind) {
        case Pending::kGet:
          p.get(s, {});
          break;
        case Pending::kPut:
          p.put(s);
          break;
        case Pending::kFolded:
          break;
        case Pending::kKept:
          p.kept->done = true;
          break;
      }
    }
  }

  ContextPtr c_;
  const std::string address_;
  const std::chrono::milliseconds timeout_;
  std::string out_;  // formatted commands not yet sent, from out_[sent_]
  size_t sent_ = 0;
  std::deque<Pending> pending_;
  Status carried_;  // a folded reply's error, for the reply that completes its operation
  Status failed_;
  std::vector<const char*> argv_;  // Append's scratch, kept to save allocations
  std::vector<size_t> lengths_;
};

// One attempt of a transaction (see redis_store.h): reads WATCH what they read first, writes wait in a map (so reads
// and scans see them) until Commit sends MULTI, SET and ZADD for each, EXEC.
class RedisTxnOps final : public TxnOps {
 public:
  explicit RedisTxnOps(RedisSession& session) : session_(session) {}

  Status Get(std::string_view key, std::string* value) override {
    if (const auto it = writes_.find(key); it != writes_.end()) {
      *value = it->second;
      return Status::OK();
    }
    auto replies = session_.Pipeline({{"WATCH", key}, {"GET", key}});
    if (!replies.ok()) return replies.status();
    watched_ = true;
    if (Status s = Check("WATCH", *(*replies)[0], REDIS_REPLY_STATUS); !s.ok()) return s;
    const redisReply& r = *(*replies)[1];
    if (r.type == REDIS_REPLY_NIL) return Status::NotFound("redis GET: no such key");
    if (Status s = Check("GET", r, REDIS_REPLY_STRING); !s.ok()) return s;
    value->assign(r.str, r.len);
    return Status::OK();
  }

  Status Put(std::string_view key, std::string_view value) override {
    writes_.insert_or_assign(std::string(key), std::string(value));
    return Status::OK();
  }

  // The index is watched before it is read, and each key before its value: a key inserted into the range, or a
  // value changed, before EXEC makes EXEC fail (no phantoms).
  Status Scan(std::string_view start, size_t limit, std::vector<std::pair<std::string, std::string>>* out) override {
    if (limit == 0) return Status::OK();
    std::string from = "[";
    from.append(start);
    const std::string count = std::to_string(limit);
    auto index = session_.Pipeline(
        {{"WATCH", RedisStore::kKeySet}, {"ZRANGEBYLEX", RedisStore::kKeySet, from, "+", "LIMIT", "0", count}});
    if (!index.ok()) return index.status();
    watched_ = true;
    if (Status s = Check("WATCH", *(*index)[0], REDIS_REPLY_STATUS); !s.ok()) return s;
    const redisReply& k = *(*index)[1];
    if (Status s = Check("ZRANGEBYLEX", k, REDIS_REPLY_ARRAY); !s.ok()) return s;
    std::vector<std::pair<std::string, std::string>> stored;
    if (k.elements > 0) {
      std::vector<std::string_view> watch = {"WATCH"}, mget = {"MGET"};
      for (size_t i = 0; i < k.elements; ++i) {
        if (Status s = Check("ZRANGEBYLEX", *k.element[i], REDIS_REPLY_STRING); !s.ok()) return s;
        watch.push_back(Text(k.element[i]));
        mget.push_back(Text(k.element[i]));
      }
      auto values = session_.Pipeline({watch, mget});
      if (!values.ok()) return values.status();
      if (Status s = Check("WATCH", *(*values)[0], REDIS_REPLY_STATUS); !s.ok()) return s;
      const redisReply& v = *(*values)[1];
      if (Status s = Check("MGET", v, REDIS_REPLY_ARRAY); !s.ok()) return s;
      if (v.elements != k.elements) return Status::Corruption("redis MGET: not one value per key");
      for (size_t i = 0; i < v.elements; ++i) {
        if (v.element[i]->type == REDIS_REPLY_NIL) {
          return Status::Corruption(
              fmt::format("redis scan: key '{}' is in {} but has no value", mget[i + 1], RedisStore::kKeySet));
        }
        if (Status s = Check("MGET", *v.element[i], REDIS_REPLY_STRING); !s.ok()) return s;
        stored.emplace_back(mget[i + 1], Text(v.element[i]));
      }
    }
    MergeOwnWrites(start, limit, std::move(stored), out);
    return Status::OK();
  }

  // MULTI, the writes, EXEC: OK, Aborted if a watched key changed (EXEC answered nil), or the error.
  Status Commit() {
    if (writes_.empty() && !watched_) return Status::OK();
    std::vector<std::vector<std::string_view>> commands = {{"MULTI"}};
    for (const auto& [key, value] : writes_) {
      commands.push_back({"SET", key, value});
      commands.push_back({"ZADD", RedisStore::kKeySet, "0", key});  // a key already there: no change, no conflict
    }
    commands.push_back({"EXEC"});
    auto replies = session_.Pipeline(commands);
    if (!replies.ok()) return replies.status();
    watched_ = false;  // EXEC unwatches, whatever its outcome
    const redisReply& exec = *replies->back();
    if (exec.type == REDIS_REPLY_NIL) return Status::Aborted("redis EXEC: a watched key changed (nil reply)");
    for (size_t i = 0; i + 1 < replies->size(); ++i) {
      if (Status s = Check(commands[i][0], *(*replies)[i], REDIS_REPLY_STATUS); !s.ok()) return s;
    }
    if (Status s = Check("EXEC", exec, REDIS_REPLY_ARRAY); !s.ok()) return s;
    for (size_t i = 0; i < exec.elements; ++i) {
      if (exec.element[i]->type == REDIS_REPLY_ERROR) {
        return Status::FailedPrecondition(fmt::format("redis EXEC: {}", Text(exec.element[i])));
      }
    }
    return Status::OK();
  }

  // Drops the writes and the watches (nothing was sent but reads).
  void Rollback() {
    writes_.clear();
    if (!watched_) return;
    watched_ = false;
    const std::string_view unwatch[] = {"UNWATCH"};
    (void)session_.Command(unwatch, 1);  // a failed session fails the next operation anyway
  }

 private:
  static Status Check(std::string_view command, const redisReply& r, int want) {
    if (r.type == REDIS_REPLY_ERROR) return Status::FailedPrecondition(fmt::format("redis {}: {}", command, Text(&r)));
    if (r.type != want) {
      return Status::Corruption(
          fmt::format("redis {} answered with a reply of type {}, not {}", command, r.type, want));
    }
    return Status::OK();
  }

  // `stored` (in key order, at most `limit`) overlaid with this transaction's writes in the range it covers: from
  // `start` to its last key, or to the end if it came short of the limit; then cut to `limit`.
  void MergeOwnWrites(std::string_view start, size_t limit, std::vector<std::pair<std::string, std::string>> stored,
                      std::vector<std::pair<std::string, std::string>>* out) const {
    const bool to_end = stored.size() < limit;
    auto w = writes_.lower_bound(start);
    const auto w_end = to_end ? writes_.end() : writes_.upper_bound(stored.back().first);
    size_t added = 0;
    for (auto it = stored.begin(); added < limit && (it != stored.end() || w != w_end);) {
      if (w == w_end || (it != stored.end() && it->first < w->first)) {
        out->push_back(std::move(*it++));
      } else {
        if (it != stored.end() && it->first == w->first) ++it;  // replaced by this transaction's write
        out->emplace_back(w->first, w->second);
        ++w;
      }
      ++added;
    }
  }

  RedisSession& session_;
  std::map<std::string, std::string, std::less<>> writes_;
  bool watched_ = false;
};

Status RedisSession::RunTransaction(const TxnBody& body, int* attempts) {
  *attempts = 0;
  Status s = failed_;
  for (int attempt = 1; attempt <= kTransactionAttempts && failed_.ok(); ++attempt) {
    ++*attempts;
    RedisTxnOps txn(*this);
    s = body(txn);
    if (s.ok()) {
      s = txn.Commit();
    } else {
      txn.Rollback();
    }
    if (!s.IsAborted()) return s;
    if (attempt < kTransactionAttempts) std::this_thread::sleep_for(ConflictBackoff(attempt));
  }
  return failed_.ok() ? s : failed_;
}

StatusOr<std::unique_ptr<RedisSession>> Connect(const RedisAddress& address, std::chrono::milliseconds timeout) {
  const std::string name = address.ToString();
  const auto cannot = [&](std::string_view why) {
    return Status::Unavailable(fmt::format("cannot connect to redis at {}: {}", name, why));
  };
  const timeval tv{static_cast<time_t>(timeout.count() / 1000),
                   static_cast<suseconds_t>(timeout.count() % 1000 * 1000)};
  ContextPtr c(address.host.empty() ? redisConnectUnixWithTimeout(address.unix_path.c_str(), tv)
                                    : redisConnectWithTimeout(address.host.c_str(), address.port, tv));
  if (c == nullptr) return cannot("out of memory");
  if (c->err != 0) return cannot(c->errstr);
  // Send and receive timeouts bound a blocking send; waits for replies are bounded by ppoll.
  if (redisSetTimeout(c.get(), tv) != REDIS_OK) return cannot(c->errstr);
  if (!address.host.empty()) {
    const int yes = 1;  // a pipelined request must not wait for the previous one's acknowledgement
    if (setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes)) != 0) return cannot(std::strerror(errno));
  }
  auto session = std::make_unique<RedisSession>(std::move(c), name, timeout);
  // A connection is not yet a Redis that answers (it may want a password, or be loading): ask.
  const std::string_view ping[] = {"PING"};
  auto pong = session->Command(ping, 1);
  if (!pong.ok()) return cannot(pong.status().message());
  if ((*pong)->type != REDIS_REPLY_STATUS || Text(pong->get()) != "PONG") {
    return cannot(fmt::format("PING answered with something other than PONG (a reply of type {})", (*pong)->type));
  }
  return session;
}

}  // namespace

StatusOr<std::unique_ptr<RedisStore>> RedisStore::Open(std::string_view address, RedisStoreOptions options) {
  auto parsed = ParseRedisAddress(address);
  if (!parsed.ok()) return parsed.status();
  auto probe = Connect(*parsed, options.timeout);
  if (!probe.ok()) return probe.status();
  return std::unique_ptr<RedisStore>(new RedisStore(std::move(*parsed), options));
}

StatusOr<std::unique_ptr<StoreSession>> RedisStore::NewSession() {
  auto session = Connect(address_, options_.timeout);
  if (!session.ok()) return session.status();
  return std::unique_ptr<StoreSession>(std::move(*session));
}

}  // namespace cell::bench
