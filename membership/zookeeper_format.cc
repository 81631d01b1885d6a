// Parsing and formatting of what the ZooKeeper membership keeps in its znodes (zookeeper_format.h), and of the
// cluster URI that names them.
#include "membership/zookeeper_format.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "common/global_ptr.h"
#include "membership/zookeeper_membership.h"

namespace cell::membership {
namespace znode {
namespace {

// Splits "key=value" lines; false if a line is not of that form.
bool ParseLines(std::string_view data, std::vector<std::pair<std::string_view, std::string_view>>* out) {
  while (!data.empty()) {
    const size_t nl = data.find('\n');
    const std::string_view line = data.substr(0, nl);
    data = nl == std::string_view::npos ? std::string_view() : data.substr(nl + 1);
    if (line.empty()) continue;
    const size_t eq = line.find('=');
    if (eq == std::string_view::npos || eq == 0) return false;
    out->emplace_back(line.substr(0, eq), line.substr(eq + 1));
  }
  return true;
}

}  // namespace

std::string RegionName(uint32_t region) { return fmt::format("{:08d}", region); }

std::string FormatRegion(const RegionEntry& entry) {
  std::string data = fmt::format("owner={}\nepoch={}\n", entry.owner, entry.epoch);
  if (entry.log_epoch != 0) fmt::format_to(std::back_inserter(data), "log_epoch={}\n", entry.log_epoch);
  return data;
}

StatusOr<std::string> FormatServer(const ServerInfo& server) {
  std::string data = fmt::format("capacity={}\n", server.capacity_bytes);
  for (const auto& [transport, uri] : server.addresses) {
    if (transport.empty() || transport.find_first_of("=\n") != std::string::npos ||
        uri.find('\n') != std::string::npos) {
      return Status::InvalidArgument(fmt::format("address {}={} cannot be stored", transport, uri));
    }
    fmt::format_to(std::back_inserter(data), "{}={}\n", transport, uri);
  }
  return data;
}

std::string FormatRoot(uint32_t region) { return fmt::format("region={}\n", region); }

bool ParseRoot(std::string_view data, uint32_t* region) {
  uint64_t id = 0;
  if (data.substr(0, 7) != "region=" || data.empty() || data.back() != '\n' ||
      !ParseNumber(data.substr(7, data.size() - 8), &id) || id == 0 || id > GlobalPtr::kMaxRegionId) {
    return false;
  }
  *region = static_cast<uint32_t>(id);
  return true;
}

}  // namespace znode

using znode::ParseLines;
using znode::ParseNumber;

StatusOr<RegionEntry> ZooKeeperMembership::ParseRegion(uint32_t region, std::string_view data, std::string_view path) {
  std::vector<std::pair<std::string_view, std::string_view>> lines;
  RegionEntry entry{region, 0, 0};
  bool have_owner = false, have_epoch = false;
  bool ok = ParseLines(data, &lines);
  for (const auto& [key, value] : lines) {
    if (key == "owner") {
      have_owner = ParseNumber(value, &entry.owner);
      ok = ok && have_owner;
    } else if (key == "epoch") {
      have_epoch = ParseNumber(value, &entry.epoch) && entry.epoch > 0;
      ok = ok && have_epoch;
    } else if (key == "log_epoch") {
      ok = ok && ParseNumber(value, &entry.log_epoch) && entry.log_epoch > 0;
    }
  }
  if (!ok || !have_owner || !have_epoch) {
    return Status::Corruption(fmt::format(
        "region table entry {} is malformed (want \"owner=<id>\\nepoch=<n>\\n[log_epoch=<n>\\n]\", found {:?}); not "
        "trusting it",
        path, std::string(data.substr(0, 200))));
  }
  return entry;
}

StatusOr<ServerInfo> ZooKeeperMembership::ParseServer(uint64_t id, std::string_view data, std::string_view path) {
  std::vector<std::pair<std::string_view, std::string_view>> lines;
  ServerInfo info;
  info.id = id;
  bool ok = ParseLines(data, &lines);
  bool have_capacity = false;
  for (const auto& [key, value] : lines) {
    if (key == "capacity") {
      have_capacity = ParseNumber(value, &info.capacity_bytes);
      ok = ok && have_capacity;
    } else {
      info.addresses[std::string(key)] = std::string(value);
    }
  }
  if (!ok || !have_capacity) {
    return Status::Corruption(
        fmt::format("server entry {} is malformed (want \"capacity=<bytes>\\n<transport>=<uri>"
                    "\\n...\", found {:?}); not trusting it",
                    path, std::string(data.substr(0, 200))));
  }
  return info;
}

StatusOr<ZooKeeperOptions> ParseZooKeeperUri(std::string_view uri) {
  constexpr std::string_view kScheme = "zk://";
  const auto bad = [uri](std::string_view why) {
    return Status::InvalidArgument(
        fmt::format("'{}' is not a ZooKeeper cluster URI ({}); expected zk://host:port[,host:port...][/root/cluster], "
                    "e.g. zk://127.0.0.1:2181/cell/default",
                    uri, why));
  };
  if (uri.substr(0, kScheme.size()) != kScheme) return bad("it must start with zk://");
  std::string_view rest = uri.substr(kScheme.size());
  const size_t slash = rest.find('/');
  const std::string_view hosts = rest.substr(0, slash);
  ZooKeeperOptions options;
  if (hosts.empty()) return bad("no host:port");
  size_t at = 0;
  while (at <= hosts.size()) {
    const size_t comma = std::min(hosts.find(',', at), hosts.size());
    const std::string_view host = hosts.substr(at, comma - at);
    const size_t colon = host.rfind(':');
    if (colon == std::string_view::npos || colon == 0 || colon + 1 == host.size() ||
        host.find_first_not_of("0123456789", colon + 1) != std::string_view::npos) {
      return bad(fmt::format("'{}' is not host:port", host));
    }
    at = comma + 1;
  }
  options.connect = std::string(hosts);
  if (slash != std::string_view::npos && slash + 1 < rest.size()) {
    std::string_view path = rest.substr(slash);
    while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
    const size_t last = path.rfind('/');
    if (last == 0) return bad("the path needs a root and a cluster name, /root/cluster");
    if (path.find("//") != std::string_view::npos) return bad("empty path component");
    options.root = std::string(path.substr(0, last));
    options.cluster = std::string(path.substr(last + 1));
  }
  return options;
}

}  // namespace cell::membership
