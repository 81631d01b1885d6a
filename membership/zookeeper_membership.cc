// ZooKeeperMembership's session and what rests on it: connecting (and authenticating), the lease that fences a
// server whose registration ZooKeeper may have dropped, renewal after expiry, server registration, the retried reads
// every operation goes through, and the watches that tell watchers what changed. The region table's operations are
// in zookeeper_regions.cc, the text of the znodes in zookeeper_format.cc.
#include "membership/zookeeper_membership.h"

#include <fmt/format.h>
#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <future>
#include <memory>
#include <mutex>
#include <shared_mutex>

#include "common/backoff.h"
#include "common/diagnostics.h"
#include "membership/zookeeper_format.h"

namespace cell::membership {
namespace {

constexpr int kMaxNodeBytes = 64 * 1024;

// With --zk-auth: the creating (authenticated) identity may do anything; anyone may read.
::ACL kWriterAndReaders[] = {{ZOO_PERM_ALL, {const_cast<char*>("auth"), const_cast<char*>("")}},
                             {ZOO_PERM_READ, {const_cast<char*>("world"), const_cast<char*>("anyone")}}};
::ACL_vector kClusterAcl = {2, kWriterAndReaders};

void AuthDone(int rc, const void* data) {
  auto* promise = static_cast<std::promise<int>*>(const_cast<void*>(data));
  promise->set_value(rc);
}

void GlobalWatcher(zhandle_t*, int type, int state, const char*, void* context) {
  auto* self = static_cast<ZooKeeperMembership*>(context);
  if (type == ZOO_SESSION_EVENT) {
    self->OnSessionEvent(state);
  } else {
    self->OnWatchFired();
  }
}

}  // namespace

using znode::ParseNumber;

ZooKeeperMembership::ZooKeeperMembership(const ZooKeeperOptions& options) : options_(options) {
  TaskScheduler* scheduler = options.scheduler;
  if (scheduler == nullptr) {
    own_scheduler_ = std::make_unique<TaskScheduler>(TaskScheduler::AtStop::kDrop, 2);
    scheduler = own_scheduler_.get();
  }
  refresher_ = std::make_unique<TaskScheduler::Lane>(*scheduler);
  lease_ = std::make_unique<TaskScheduler::Lane>(*scheduler);
}

StatusOr<std::unique_ptr<ZooKeeperMembership>> ZooKeeperMembership::Open(const ZooKeeperOptions& options) {
  if (options.connect.empty()) return Status::InvalidArgument("--zk needs host:port[,host:port...]");
  if (options.root.empty() || options.root[0] != '/' || options.root.back() == '/' ||
      options.cluster.find('/') != std::string::npos || options.cluster.empty()) {
    return Status::InvalidArgument(fmt::format(
        "ZooKeeper root '{}' must be an absolute path and cluster '{}' a plain name", options.root, options.cluster));
  }
  zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
  auto m = std::unique_ptr<ZooKeeperMembership>(new ZooKeeperMembership(options));
  CELL_RETURN_IF_ERROR(m->Connect());
  // The layout's parents; another process may be creating them at the same time.
  std::string path;
  std::vector<std::string> parents;
  size_t at = 1;
  while (at <= options.root.size()) {
    const size_t slash = options.root.find('/', at);
    parents.push_back(options.root.substr(0, slash));
    if (slash == std::string::npos) break;
    at = slash + 1;
  }
  parents.push_back(m->Path(""));
  for (const char* child : {"servers", "regions", "region-ids"}) parents.push_back(m->Path(child));
  if (!options.create_layout) {
    // A reader creates nothing: a mistyped cluster path is an error, not an empty new cluster.
    for (size_t i = parents.size() - 4; i < parents.size(); ++i) {
      Stat stat{};
      const int rc = m->Retry([&] { return zoo_exists(m->zh_, parents[i].c_str(), 0, &stat); });
      if (rc == ZNONODE) {
        return Status::NotFound(fmt::format(
            "no Cell cluster at zk://{}{}: ZooKeeper has no znode {} (check the URI's /root/cluster; no server of "
            "that cluster has started yet?)",
            options.connect, m->Path(""), parents[i]));
      }
      if (rc != ZOK) return m->Error(rc, fmt::format("reading {}", parents[i]));
    }
    parents.clear();
  }
  for (size_t i = 0; i < parents.size(); ++i) {
    const std::string& p = parents[i];
    // The root (shared by clusters) stays open; the cluster's own znodes get the cluster's ACL.
    const ::ACL_vector* acl = i + 4 < parents.size() ? &ZOO_OPEN_ACL_UNSAFE : m->Acl();
    // Existing parents are left alone (a reader without the cluster's identity may not even try to create them).
    Stat stat{};
    int rc = m->Retry([&] { return zoo_exists(m->zh_, p.c_str(), 0, &stat); });
    if (rc == ZNONODE) rc = m->Retry([&] { return zoo_create(m->zh_, p.c_str(), "", 0, acl, 0, nullptr, 0); });
    if (rc != ZOK && rc != ZNODEEXISTS) return m->Error(rc, fmt::format("creating {}", p));
  }
  m->lease_->PostAfter(options.session_timeout / 3, [raw = m.get()] { raw->RenewLease(); });
  return m;
}

Status ZooKeeperMembership::Connect() {
  {
    std::lock_guard lock(state_mu_);
    state_ = 0;
  }
  zh_ = zookeeper_init(options_.connect.c_str(), GlobalWatcher, static_cast<int>(options_.session_timeout.count()),
                       nullptr, this, 0);
  if (zh_ == nullptr) {
    return Status::InvalidArgument(
        fmt::format("cannot start a ZooKeeper client for '{}': {}", options_.connect, std::strerror(errno)));
  }
  {
    std::unique_lock lock(state_mu_);
    if (!state_cv_.wait_for(lock, options_.operation_timeout,
                            [&] { return state_ == ZOO_CONNECTED_STATE || interrupted_; }) ||
        state_ != ZOO_CONNECTED_STATE) {
      return Status::Unavailable(fmt::format("no ZooKeeper answered at {} within {} ms", options_.connect,
                                             options_.operation_timeout.count()));
    }
  }
  if (!options_.auth.empty()) {
    if (options_.auth.find(':') == std::string::npos) {
      return Status::InvalidArgument("--zk-auth must be user:password");
    }
    std::promise<int> done;
    auto result = done.get_future();
    int rc = zoo_add_auth(zh_, "digest", options_.auth.data(), static_cast<int>(options_.auth.size()), AuthDone, &done);
    if (rc == ZOK) {
      if (result.wait_for(options_.operation_timeout) != std::future_status::ready) {
        return Status::Unavailable("ZooKeeper did not answer the authentication in time");
      }
      rc = result.get();
    }
    if (rc != ZOK) return Error(rc, "authenticating with --zk-auth");
  }
  return Status::OK();
}

const ::ACL_vector* ZooKeeperMembership::Acl() const {
  return options_.auth.empty() ? &ZOO_OPEN_ACL_UNSAFE : &kClusterAcl;
}

Status ZooKeeperMembership::Renew() {
  {
    std::lock_guard lock(lease_mu_);
    if (!expired_) return Status::OK();
  }
  {
    // Calls on the old handle finish first (they fail: the session expired); callers retry on the new one.
    std::unique_lock handle(handle_mu_);
    zookeeper_close(zh_);
    zh_ = nullptr;
    CELL_RETURN_IF_ERROR(Connect());
  }
  {
    std::lock_guard lock(lease_mu_);
    expired_ = false;
    registered_ = 0;
  }
  OnWatchFired();  // re-read, and re-arm the watches on the new session
  return Status::OK();
}

Status ZooKeeperMembership::ServingStatus() {
  std::lock_guard lock(lease_mu_);
  if (registered_ == 0) return Status::FailedPrecondition("no server is registered through this membership");
  if (expired_) {
    return Status::FailedPrecondition(fmt::format(
        "the ZooKeeper session of server {} expired: other servers may own its regions now; renew the session, "
        "register again and re-read the region table before serving",
        registered_));
  }
  const auto age = std::chrono::steady_clock::now() - confirmed_;
  if (age > options_.session_timeout * 2 / 3) {
    return Status::Unavailable(fmt::format(
        "server {} has not heard from ZooKeeper for {} ms (session timeout {} ms): not serving until it does",
        registered_, std::chrono::duration_cast<std::chrono::milliseconds>(age).count(),
        options_.session_timeout.count()));
  }
  return Status::OK();
}

void ZooKeeperMembership::RenewLease() {
  uint64_t id = 0;
  {
    std::lock_guard lock(lease_mu_);
    if (!expired_) id = registered_;
  }
  if (id != 0) {
    // The time is taken before asking: the answer proves the registration was alive at least then.
    const auto asked = std::chrono::steady_clock::now();
    Stat stat{};
    const std::string path = Path(fmt::format("servers/{}", id));
    int rc;
    int64_t session;
    {
      std::shared_lock handle(handle_mu_);
      rc = zoo_exists(zh_, path.c_str(), 0, &stat);
      session = zoo_client_id(zh_)->client_id;
    }
    std::lock_guard lock(lease_mu_);
    if (registered_ == id && rc == ZOK && stat.ephemeralOwner == session) {
      confirmed_ = asked;
    } else if (registered_ == id &&
               (rc == ZNONODE || rc == ZSESSIONEXPIRED || (rc == ZOK && stat.ephemeralOwner != session))) {
      expired_ = true;  // the registration is gone: fenced until renewed
    }
  }
  // (Stopped by the destructor: this is dropped then, and a renewal under way is waited for.)
  lease_->PostAfter(options_.session_timeout / 3, [this] { RenewLease(); });
}

ZooKeeperMembership::~ZooKeeperMembership() {
  // The background tasks end before the session they use: a refresh or renewal under way finishes, and the next is
  // dropped (as are those the client's event thread posts until the handle is closed).
  refresher_->Stop();
  lease_->Stop();
  if (zh_ != nullptr) zookeeper_close(zh_);  // ends the session: this process's ephemeral znodes go with it
}

void ZooKeeperMembership::Interrupt() {
  std::lock_guard lock(state_mu_);
  interrupted_ = true;
  state_cv_.notify_all();
}

std::string ZooKeeperMembership::Path(std::string_view child) const {
  std::string p = fmt::format("{}/{}", options_.root, options_.cluster);
  if (!child.empty()) fmt::format_to(std::back_inserter(p), "/{}", child);
  return p;
}

int ZooKeeperMembership::Retry(const std::function<int()>& op, bool* retried) {
  Backoff backoff(std::chrono::milliseconds(10), std::chrono::milliseconds(500),
                  std::chrono::steady_clock::now() + options_.operation_timeout);
  while (true) {
    int rc;
    {
      std::shared_lock handle(handle_mu_);  // Renew() swaps the handle under the exclusive lock
      rc = op();
    }
    if (rc != ZCONNECTIONLOSS && rc != ZOPERATIONTIMEOUT) return rc;
    if (retried != nullptr) *retried = true;
    const std::optional<Backoff::Clock::time_point> next = backoff.Next();
    if (!next) return rc;              // the operation timeout would pass first
    std::unique_lock lock(state_mu_);  // back off until the client reports a connection, or a while
    if (interrupted_) return rc;
    state_cv_.wait_until(lock, *next, [&] { return state_ == ZOO_CONNECTED_STATE || interrupted_; });
  }
}

Status ZooKeeperMembership::Error(int rc, std::string_view what) const {
  const std::string message = fmt::format("ZooKeeper at {}: {}: {}", options_.connect, what, zerror(rc));
  switch (rc) {
    case ZNONODE:
      return Status::NotFound(message);
    case ZNODEEXISTS:
      return Status::FailedPrecondition(message);
    case ZBADVERSION:
      return Status::Aborted(message);
    case ZBADARGUMENTS:
      return Status::InvalidArgument(message);
    case ZNOAUTH:
    case ZAUTHFAILED:
      return Status::FailedPrecondition(message + " (the cluster's znodes are writable only with its --zk-auth)");
    default:
      return Status::Unavailable(message);
  }
}

StatusOr<std::string> ZooKeeperMembership::ReadNode(const std::string& path, bool watch, int* version) {
  std::string buffer(kMaxNodeBytes, '\0');
  int length = 0;
  Stat stat{};
  const int rc = Retry([&] {
    length = kMaxNodeBytes;
    return zoo_get(zh_, path.c_str(), watch ? 1 : 0, buffer.data(), &length, &stat);
  });
  if (rc != ZOK) return Error(rc, fmt::format("reading {}", path));
  buffer.resize(length < 0 ? 0 : static_cast<size_t>(length));
  if (version != nullptr) *version = stat.version;
  return buffer;
}

StatusOr<std::vector<std::string>> ZooKeeperMembership::Children(const std::string& path, bool watch) {
  String_vector children{};
  const int rc = Retry([&] {
    deallocate_String_vector(&children);
    children = String_vector{};
    return zoo_get_children(zh_, path.c_str(), watch ? 1 : 0, &children);
  });
  if (rc != ZOK) return Error(rc, fmt::format("listing {}", path));
  std::vector<std::string> out;
  for (int i = 0; i < children.count; ++i) out.emplace_back(children.data[i]);
  deallocate_String_vector(&children);
  return out;
}

Status ZooKeeperMembership::RegisterServer(const ServerInfo& self) {
  if (self.id == 0) return Status::InvalidArgument("server id 0 is reserved");
  CELL_ASSIGN_OR_RETURN(const std::string data, znode::FormatServer(self));
  const std::string path = Path(fmt::format("servers/{}", self.id));
  bool retried = false;
  const int rc = Retry(
      [&] {
        return zoo_create(zh_, path.c_str(), data.data(), static_cast<int>(data.size()), Acl(), ZOO_EPHEMERAL, nullptr,
                          0);
      },
      &retried);
  if (rc == ZNODEEXISTS) {
    // Ours, if a create lost to connection loss went through after all; otherwise another live server's.
    Stat stat{};
    char buffer[1];
    int length = 0;
    bool ours = false;
    if (retried) {
      std::shared_lock handle(handle_mu_);
      ours = zoo_get(zh_, path.c_str(), 0, buffer, &length, &stat) == ZOK &&
             stat.ephemeralOwner == zoo_client_id(zh_)->client_id;
    }
    if (ours) {
      std::lock_guard lock(lease_mu_);
      registered_ = self.id;
      confirmed_ = std::chrono::steady_clock::now();
      return Status::OK();
    }
    return Status::FailedPrecondition(fmt::format("server {} is already registered ({})", self.id, path));
  }
  if (rc != ZOK) return Error(rc, fmt::format("registering server {}", self.id));
  std::lock_guard lock(lease_mu_);
  registered_ = self.id;
  confirmed_ = std::chrono::steady_clock::now();
  return Status::OK();
}

Status ZooKeeperMembership::UnregisterServer(uint64_t id) {
  const std::string path = Path(fmt::format("servers/{}", id));
  // Only our own registration: a server with the same id registered by another process (another session) stays.
  Stat stat{};
  int rc = Retry([&] { return zoo_exists(zh_, path.c_str(), 0, &stat); });
  if (rc == ZNONODE) return Status::NotFound(fmt::format("server {} is not registered", id));
  if (rc != ZOK) return Error(rc, fmt::format("unregistering server {}", id));
  int64_t session = 0;
  {
    std::shared_lock handle(handle_mu_);
    session = zoo_client_id(zh_)->client_id;
  }
  if (stat.ephemeralOwner != session) {
    return Status::FailedPrecondition(fmt::format(
        "server {} was registered by another session (another process, or this one before its session expired); "
        "not removing it",
        id));
  }
  rc = Retry([&] { return zoo_delete(zh_, path.c_str(), stat.version); });
  if (rc == ZNONODE) return Status::NotFound(fmt::format("server {} is not registered", id));
  if (rc != ZOK) return Error(rc, fmt::format("unregistering server {}", id));
  std::lock_guard lock(lease_mu_);
  if (registered_ == id) registered_ = 0;
  return Status::OK();
}

StatusOr<std::vector<ServerInfo>> ZooKeeperMembership::ListServers() {
  auto names = Children(Path("servers"), false);
  if (!names.ok()) return names.status();
  std::map<uint64_t, ServerInfo> servers;
  for (const std::string& name : *names) {
    const std::string path = Path("servers/" + name);
    uint64_t id = 0;
    if (!ParseNumber(std::string_view(name), &id) || id == 0) {
      return Status::Corruption(fmt::format("server znode {} is not named by a server id; not trusting it", path));
    }
    auto data = ReadNode(path, false, nullptr);
    if (data.status().IsNotFound()) continue;  // it left while we listed
    if (!data.ok()) return data.status();
    auto info = ParseServer(id, *data, path);
    if (!info.ok()) return info.status();
    servers[id] = *info;
  }
  std::vector<ServerInfo> out;
  for (auto& [id, info] : servers) out.push_back(std::move(info));
  return out;
}

StatusOr<bool> ZooKeeperMembership::IsRegistered(uint64_t id) {
  // A sync first: the server this client reads from catches up with the leader as of now, so the read after it is no
  // older than this call (a plain read may come from a follower that lags).
  struct Synced {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    int rc = ZOK;
  };
  auto synced = std::make_shared<Synced>();
  const std::string path = Path("servers");
  auto* reference = new std::shared_ptr<Synced>(synced);  // the completion's (deleted here if it never runs)
  int rc;
  {
    std::shared_lock handle(handle_mu_);
    rc = zoo_async(
        zh_, path.c_str(),
        [](int result, const char*, const void* data) {
          // The completion owns a reference: it may run after the caller gave up waiting.
          auto* keep = static_cast<std::shared_ptr<Synced>*>(const_cast<void*>(data));
          {
            std::lock_guard lock((*keep)->mu);
            (*keep)->done = true;
            (*keep)->rc = result;
          }
          (*keep)->cv.notify_all();
          delete keep;
        },
        reference);
  }
  if (rc != ZOK) {
    delete reference;
    return Error(rc, fmt::format("syncing {}", path));
  }
  {
    std::unique_lock lock(synced->mu);
    if (!synced->cv.wait_for(lock, options_.operation_timeout, [&] { return synced->done; })) {
      return Status::DeadlineExceeded(fmt::format("ZooKeeper at {}: syncing {}: no answer in {} ms", options_.connect,
                                                  path, options_.operation_timeout.count()));
    }
    if (synced->rc != ZOK) return Error(synced->rc, fmt::format("syncing {}", path));
  }
  const std::string server = Path(fmt::format("servers/{}", id));
  Stat stat{};
  rc = Retry([&] { return zoo_exists(zh_, server.c_str(), 0, &stat); });
  if (rc == ZOK) return true;
  if (rc == ZNONODE) return false;
  return Error(rc, fmt::format("looking for {}", server));
}

void ZooKeeperMembership::Watch(std::function<void(const MembershipEvent&)> watcher) {
  bool first;
  {
    std::lock_guard lock(watch_mu_);
    first = !have_baseline_;
  }
  if (first) {
    // The baseline is read here, before Watch returns, so that every later change is reported. (Not under
    // watch_mu_: the client's event thread takes it, and synchronous calls wait on that thread.)
    std::map<uint64_t, ServerInfo> servers;
    std::map<uint32_t, RegionEntry> regions;
    const bool ok = ReadState(&servers, &regions);
    std::lock_guard lock(watch_mu_);
    if (!have_baseline_ && ok) {
      seen_servers_ = std::move(servers);
      seen_regions_ = std::move(regions);
      have_baseline_ = true;
    } else if (!ok) {
      dirty_ = true;
    }
  }
  {
    std::lock_guard lock(watch_mu_);
    watchers_.push_back(std::move(watcher));
  }
  PostRefresh();  // if the baseline could not be read, or a watch fired meanwhile
}

bool ZooKeeperMembership::ReadState(std::map<uint64_t, ServerInfo>* servers, std::map<uint32_t, RegionEntry>* regions) {
  auto server_names = Children(Path("servers"), true);
  if (!server_names.ok()) return false;
  for (const auto& n : *server_names) {
    uint64_t id = 0;
    if (ParseNumber(std::string_view(n), &id)) (*servers)[id] = ServerInfo{id, {}, 0};
  }
  auto region_names = Children(Path("regions"), true);
  if (!region_names.ok()) return false;
  for (const auto& n : *region_names) {
    uint32_t id = 0;
    if (!ParseNumber(std::string_view(n), &id)) continue;
    const std::string path = Path("regions/" + n);
    auto data = ReadNode(path, true, nullptr);
    if (!data.ok()) continue;
    auto entry = ParseRegion(id, *data, path);
    if (entry.ok()) {
      (*regions)[id] = *entry;
    } else {
      diag::Error("{}", entry.status().ToString());  // reported, not trusted
    }
  }
  return true;
}

void ZooKeeperMembership::OnSessionEvent(int state) {
  {
    std::lock_guard lock(state_mu_);
    state_ = state;
  }
  state_cv_.notify_all();
  if (state == ZOO_EXPIRED_SESSION_STATE) {
    diag::Error("ZooKeeper session at {} expired: this process's registration is gone; fenced until renewed",
                options_.connect);
    std::lock_guard lock(lease_mu_);
    expired_ = true;
  }
  if (state == ZOO_CONNECTED_STATE) OnWatchFired();  // watches may have fired while disconnected
}

void ZooKeeperMembership::OnWatchFired() {
  {
    std::lock_guard lock(watch_mu_);
    dirty_ = true;
  }
  PostRefresh();
}

void ZooKeeperMembership::PostRefresh() {
  {
    std::lock_guard lock(watch_mu_);
    if (!dirty_ || watchers_.empty() || refresh_posted_) return;
    refresh_posted_ = true;
  }
  refresher_->PostAfter(std::chrono::milliseconds(0), [this] { Refresh(/*retry=*/false); });
}

void ZooKeeperMembership::Refresh(bool retry) {
  // On a lane, not on the ZooKeeper client's event thread, which must not block in synchronous calls. Watches are
  // one-shot; every read here re-arms them. Changes that come faster than a read are reported as their end state.
  std::unique_lock lock(watch_mu_);
  (retry ? retry_posted_ : refresh_posted_) = false;
  if (!dirty_ || watchers_.empty()) return;
  dirty_ = false;
  lock.unlock();
  std::map<uint64_t, ServerInfo> servers;
  std::map<uint32_t, RegionEntry> regions;
  const bool ok = ReadState(&servers, &regions);
  lock.lock();
  if (!ok) {
    // Tried again in 200 ms, or at once when the client connects again (OnSessionEvent posts a refresh then).
    dirty_ = true;
    if (retry_posted_) return;
    retry_posted_ = true;
    lock.unlock();
    refresher_->PostAfter(std::chrono::milliseconds(200), [this] { Refresh(/*retry=*/true); });
    return;
  }
  std::vector<MembershipEvent> events;
  if (have_baseline_) {
    for (const auto& [id, info] : servers) {
      if (!seen_servers_.contains(id)) events.push_back({MembershipEvent::Kind::kServerJoined, id, {}});
    }
    for (const auto& [id, info] : seen_servers_) {
      if (!servers.contains(id)) events.push_back({MembershipEvent::Kind::kServerLeft, id, {}});
    }
    for (const auto& [id, e] : regions) {
      auto it = seen_regions_.find(id);
      if (it == seen_regions_.end() || !(it->second == e)) {
        events.push_back({MembershipEvent::Kind::kRegionChanged, 0, e});
      }
    }
  }
  have_baseline_ = true;
  seen_servers_ = std::move(servers);
  seen_regions_ = std::move(regions);
  for (const auto& e : events) {
    for (const auto& w : watchers_) w(e);
  }
}

}  // namespace cell::membership
