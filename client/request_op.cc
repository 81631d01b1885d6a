// The state machine every RPC of the client runs (RequestOp: a get, put or delete, or a page of a server-side scan),
// and the rule for where and when an operation's next attempt begins (Attempts). See store_client.h.
#include <fmt/format.h>

#include <future>
#include <optional>
#include <string>
#include <utility>
#include <variant>

#include "client/store_client.h"
#include "client/store_client_internal.h"
#include "common/key_limits.h"
#include "common/lent.h"
#include "rpc/proto/store.pb.h"
#include "rpc/store_wire.h"

namespace cell::client {

using cell::proto::StoreMethod;

namespace {
// The users of the thread's lent objects (common/lent.h).
struct RequestBytesTag;
struct ReplyTag;
}  // namespace

Status StoreClient::Attempts::GoOn(GlobalPtr next) {
  if (++hops_ < 256) {
    at_ = next;
    return Status::OK();
  }
  hops_ = 0;
  at_ = GlobalPtr();
  return Status::Aborted("a request was sent on from server to server more than 256 times");
}

StatusOr<StoreClient::Deadline> StoreClient::Attempts::Retry(const Status& why) {
  if (const std::optional<Deadline> due = backoff_.Next()) return *due;
  // No server could be reached: Unavailable; anything else kept failing until the deadline: DeadlineExceeded.
  return Status::FromCode(why.IsUnavailable() ? Status::Code::kUnavailable : Status::Code::kDeadlineExceeded,
                          fmt::format("gave up after {} ms: {}", timeout_.count(), why.ToString()));
}

Status StoreClient::Run(Operation op, Deadline deadline, GlobalPtr start) {
  Attempts tries(deadline, start, options_.timeout);
  while (true) {
    if (closing_.load(std::memory_order_acquire)) return Status::Unavailable("the client is closing");
    Status why;
    uint32_t region = tries.at().region;
    if (tries.at().is_null()) {
      auto root = Root();
      if (!root.ok()) return root.status();
      region = *root;
    }
    auto route = cache_.Lookup(region);
    if (route.ok()) {
      auto connection = ConnectionTo(route->server, deadline);
      if (connection.ok()) {
        Attempt attempt = op(**connection, *route, tries.at(), deadline);
        if (!attempt.next.is_null()) {
          why = tries.GoOn(attempt.next);
          if (why.ok()) continue;
        } else if (!attempt.retry) {
          return attempt.status;
        } else {
          why = attempt.status;
        }
      } else if (connection.status().IsPermissionDenied()) {
        return connection.status();  // retrying cannot help: the key is wrong or missing
      } else {
        DropServer(route->owner().id, nullptr);
        why = connection.status();
      }
    } else if (route.status().IsUnavailable()) {
      why = route.status();  // no live owner right now: wait for a takeover or a restart
    } else {
      return route.status();
    }
    CELL_ASSIGN_OR_RETURN(const Deadline due, tries.Retry(why));
    stats_.retries.fetch_add(1, std::memory_order_relaxed);
    std::this_thread::sleep_until(due);  // a retry's back-off in the caller's own thread, not synchronisation
  }
}

GlobalPtr StoreClient::NextFrom(const cell::proto::StoreReply& reply) {
  if (reply.leaf() != 0) {
    paths_.Insert(btree::MeganodeRange{GlobalPtr::Unpack(reply.leaf()), reply.leaf_min(), reply.leaf_max()});
  }
  // (The first meganode stands for the root: the server it names starts at the root.)
  return GlobalPtr::Unpack(reply.elsewhere());
}

struct StoreClient::RequestOp {
  RequestOp(uint16_t method, bool idempotent, bool follow, GlobalPtr start, Deadline deadline,
            std::chrono::milliseconds timeout, Request request, Completion done)
      : method(method),
        idempotent(idempotent),
        follow(follow),
        request(std::move(request)),
        tries(deadline, start, timeout),
        done(std::move(done)) {}
  // Tells the caller, in the form it asked for (exactly once: every path that ends the operation calls this).
  void Finish(const Status& status, cell::proto::StoreReply* reply) const {
    if (const auto* get = std::get_if<GetCallback>(&done)) {
      return (*get)(status, status.ok() && reply != nullptr ? std::string_view(reply->value()) : std::string_view());
    }
    if (const auto* plain = std::get_if<DoneCallback>(&done)) return (*plain)(status);
    std::get<RequestDone>(done)(status, reply);
  }

  const uint16_t method;
  const bool idempotent;  // may be sent again after its connection died (a write may have been applied: it is not)
  const bool follow;      // goes on to the meganode a reply's `elsewhere` names (a scan's caller does that itself)
  const Request request;
  Attempts tries;  // touched by one step at a time: each step starts the next
  const Completion done;
  // The attempt under way, from Step to OnReply: where it goes, and, once sent, the operation itself, which it keeps
  // alive (the transport's callback holds only a pointer to it, small enough for std::function to keep without
  // allocating).
  Route route;
  rpc::Connection* connection = nullptr;  // alive while its callbacks run (the client's map keeps it)
  std::shared_ptr<RequestOp> in_flight;
};

void StoreClient::StartRequest(uint16_t method, bool idempotent, bool follow, GlobalPtr start, Deadline deadline,
                               Request request, Completion done) {
  Step(std::make_shared<RequestOp>(method, idempotent, follow, start, deadline, options_.timeout, std::move(request),
                                   std::move(done)));
}

Status StoreClient::RunRequest(uint16_t method, bool idempotent, bool follow, GlobalPtr start, Deadline deadline,
                               Request request, cell::proto::StoreReply* reply) {
  std::promise<Status> promise;
  auto future = promise.get_future();
  StartRequest(method, idempotent, follow, start, deadline, std::move(request),
               [&promise, reply](const Status& status, cell::proto::StoreReply* answer) {
                 if (answer != nullptr) *reply = std::move(*answer);
                 promise.set_value(status);
               });
  rpc::FlushHeldSends();
  return future.get();
}

void StoreClient::StartKeyOp(uint16_t method, bool idempotent, std::string_view key, const std::string_view* value,
                             Deadline deadline, Completion done) {
  const GlobalPtr cached = paths_.Lookup(key);
  StartRequest(method, idempotent, /*follow=*/true, cached, deadline, KeyRequestFor(key, value, cached),
               std::move(done));
}

StoreClient::KeyRequest StoreClient::KeyRequestFor(std::string_view key, const std::string_view* value,
                                                   GlobalPtr cached, FillRequest fill) {
  return KeyRequest{{key.begin(), key.end()},
                    value != nullptr ? std::optional<std::string>(*value) : std::nullopt,
                    cached,
                    std::move(fill)};
}

void StoreClient::BuildKeyRequest(const KeyRequest& spec, const Route& route, GlobalPtr start, std::string* out) {
  // `cached`: the meganode the path cache gave for the key, where the first attempt begins; any other start (a
  // redirect's) asks for the range of the leaf meganode that answers, so that the next operation on the key begins
  // there.
  const bool want_range = !start.is_null() && !(start == spec.cached);
  if (!spec.fill) {
    out->clear();
    rpc::AppendPlainKeyRequest(route.entry.region, route.entry.epoch, spec.key(), spec.value ? &*spec.value : nullptr,
                               start.Pack(), want_range, out);
    return;
  }
  // A transaction's step sets fields of its own too: a message.
  cell::proto::KeyRequest request;
  spec.fill(&request);
  request.mutable_target()->set_region(route.entry.region);
  request.mutable_target()->set_epoch(route.entry.epoch);
  request.set_key(spec.key_bytes.data(), spec.key_bytes.size());
  if (spec.value) request.set_value(*spec.value);
  request.set_meganode(start.Pack());
  request.set_want_range(want_range);
  request.SerializeToString(out);
}

void StoreClient::Step(std::shared_ptr<RequestOp> op) {
  if (closing_.load(std::memory_order_acquire))
    return op->Finish(Status::Unavailable("the client is closing"), nullptr);
  // A transport's thread must not wait on the table (it may be completing other operations' replies): a step that
  // would runs on the timer thread instead, at once.
  const bool may_block = !rpc::OnTransportThread();
  uint32_t region = op->tries.at().region;
  if (op->tries.at().is_null()) {
    region = root_.load(std::memory_order_acquire);
    if (region == 0) {
      if (!may_block) return Schedule(Clock::now(), [this, op = std::move(op)] { Step(op); });
      auto root = Root();
      if (!root.ok()) return op->Finish(root.status(), nullptr);
      region = *root;
    }
  }
  if (!may_block && cache_.CachedOwner(region) == 0) {
    return Schedule(Clock::now(), [this, op = std::move(op)] { Step(op); });
  }
  auto route = cache_.Lookup(region);
  if (!route.ok()) {
    // No live owner right now: wait for a takeover or a restart. Anything else is final.
    if (route.status().IsUnavailable()) return Retry(op, route.status());
    return op->Finish(route.status(), nullptr);
  }
  // The attempt's route is the operation's from here (its server is what the connection is asked for), and the
  // operation itself is moved along, step to step: a shared_ptr's count is atomic, and a copy costs.
  RequestOp* const raw = op.get();
  raw->route = std::move(*route);
  ConnectAsync(raw->route.server, raw->tries.deadline(),
               [this, op = std::move(op)](const StatusOr<std::shared_ptr<rpc::Connection>>& connection) mutable {
                 if (connection.ok()) return Send(std::move(op), connection->get());
                 // A refused key stays refused; a server not reached may have failed (its regions moving).
                 if (connection.status().IsPermissionDenied()) return op->Finish(connection.status(), nullptr);
                 DropServer(op->route.owner().id, nullptr);
                 Retry(op, connection.status());
               });
}

void StoreClient::Send(std::shared_ptr<RequestOp> op, rpc::Connection* connection) {
  RequestOp* const raw = op.get();
  const Route& route = raw->route;
  // The request is built in the thread's lent buffer (Call copies it before it returns).
  Lent<std::string, RequestBytesTag> bytes;
  std::string& request = *bytes;
  if (const KeyRequest* key = std::get_if<KeyRequest>(&raw->request)) {
    BuildKeyRequest(*key, route, raw->tries.at(), &request);
  } else {
    std::get<BuildRequest>(raw->request)(route, raw->tries.at(), &request);
  }
  // The callback holds the connection only by pointer (alive while its callbacks run): dropping its last reference
  // from its own thread would destroy it there. The client's map keeps it; the destructor closes it first.
  raw->connection = connection;
  // The operation keeps itself until the callback takes it (the transport runs it exactly once, maybe before Call
  // returns: raw is not used after the call).
  raw->in_flight = std::move(op);
  const Deadline deadline = raw->tries.deadline();
  connection->Call(
      raw->method, request,
      [this, raw](const Status& status, std::string_view response) {
        const std::shared_ptr<RequestOp> op = std::move(raw->in_flight);
        OnReply(op, status, response);
      },
      deadline);
  if (request.size() > kLentKeepBytes) bytes.Shrink();
}

void StoreClient::OnReply(const std::shared_ptr<RequestOp>& op, const Status& status, std::string_view response) {
  // Not used once this reply starts a step or a retry: the step replaces op->route.
  const Route& route = op->route;
  rpc::Connection* const connection = op->connection;
  if (!status.ok()) {
    if (status.IsUnavailable() && !connection->health().ok()) {
      // The connection died: the server may be gone, its regions moving. (Its replacement is made by the next step
      // that needs one; it is not released here, on its own thread.)
      cache_.OnServerUnreachable(route.owner().id);
      if (!op->idempotent) {
        // A write whose connection died may have been applied: say so rather than send it again.
        return op->Finish(Status::Unavailable(fmt::format(
                              "the connection to server {} failed after the request was sent; it may or may not have "
                              "been applied: {}",
                              route.owner().id, status.message())),
                          nullptr);
      }
      return Retry(op, status);
    }
    if (status.IsUnavailable()) return Retry(op, status);  // fenced for now
    return op->Finish(status, nullptr);
  }
  // The thread's reply message: its strings keep their memory from one reply to the next. A scan's page or a
  // multi-get, whose repeated fields would keep their elements, is parsed into a fresh one.
  Lent<cell::proto::StoreReply, ReplyTag> lent(std::holds_alternative<KeyRequest>(op->request));
  if (response.size() > kLentKeepBytes) lent.Shrink();
  cell::proto::StoreReply& reply = *lent;
  // A key request's reply is read by hand (rpc/store_wire.h), or by protobuf when it holds more than those fields.
  if (!(std::holds_alternative<KeyRequest>(op->request) && rpc::ParseKeyReply(response, &reply)) &&
      !reply.ParseFromArray(response.data(), static_cast<int>(response.size()))) {
    return op->Finish(
        Status::Corruption(fmt::format("malformed reply ({} bytes) from server {}", response.size(), route.owner().id)),
        nullptr);
  }
  if (!reply.not_acknowledged().empty()) {
    return op->Finish(Status::Unavailable(fmt::format(
                          "server {} made the write but may not acknowledge it ({}); it may or may not have been "
                          "applied",
                          route.owner().id, reply.not_acknowledged())),
                      nullptr);
  }
  if (reply.has_wrong_owner()) {
    cache_.OnWrongOwner(route.entry.region, route.owner().id, reply.wrong_owner().epoch());
    return Retry(
        op, Status::Unavailable(fmt::format("server {} no longer owns region {} (it knows epoch {})", route.owner().id,
                                            route.entry.region, reply.wrong_owner().epoch())));
  }
  if (const GlobalPtr next = op->follow ? NextFrom(reply) : GlobalPtr(); !next.is_null()) {
    // Another server's meganode: go on there now.
    Status went = op->tries.GoOn(next);
    if (went.ok()) return Step(op);
    return Retry(op, went);
  }
  if (const KeyRequest* key = std::get_if<KeyRequest>(&op->request);
      key != nullptr && (op->method == StoreMethod::STORE_GET || op->method == StoreMethod::STORE_DELETE) &&
      !reply.found()) {
    return op->Finish(Status::NotFound(fmt::format("no key '{}'", key->key())), nullptr);
  }
  op->Finish(Status::OK(), &reply);
}

void StoreClient::Retry(const std::shared_ptr<RequestOp>& op, const Status& why) {
  auto due = op->tries.Retry(why);
  if (!due.ok()) return op->Finish(due.status(), nullptr);
  stats_.retries.fetch_add(1, std::memory_order_relaxed);
  Schedule(*due, [this, op] { Step(op); });
}

Status StoreClient::RunKey(uint16_t method, bool idempotent, std::string_view key, const std::string_view* value,
                           Deadline deadline, cell::proto::StoreReply* reply) {
  const GlobalPtr cached = paths_.Lookup(key);
  return RunRequest(method, idempotent, /*follow=*/true, cached, deadline, KeyRequestFor(key, value, cached), reply);
}

void StoreClient::StartKeyStep(uint16_t method, bool idempotent, std::string_view key, FillRequest fill,
                               Deadline deadline, StepDone done) {
  const GlobalPtr cached = paths_.Lookup(key);
  StartRequest(method, idempotent, /*follow=*/true, cached, deadline,
               KeyRequestFor(key, nullptr, cached, std::move(fill)), std::move(done));
}

Status StoreClient::RunKeyStep(uint16_t method, bool idempotent, std::string_view key, FillRequest fill,
                               Deadline deadline, cell::proto::StoreReply* reply) {
  CELL_RETURN_IF_ERROR(CheckMayWait());
  const GlobalPtr cached = paths_.Lookup(key);
  return RunRequest(method, idempotent, /*follow=*/true, cached, deadline,
                    KeyRequestFor(key, nullptr, cached, std::move(fill)), reply);
}

Status StoreClient::GetServerSide(std::string_view key, std::string* value, Deadline deadline) {
  cell::proto::StoreReply reply;
  CELL_RETURN_IF_ERROR(RunKey(StoreMethod::STORE_GET, /*idempotent=*/true, key, nullptr, deadline, &reply));
  *value = std::move(*reply.mutable_value());
  return Status::OK();
}

}  // namespace cell::client
