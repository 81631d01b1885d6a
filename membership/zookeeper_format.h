// The text the ZooKeeper membership keeps in its znodes (their layout is in zookeeper_membership.h): region entries
// "owner=<id>\nepoch=<n>\n[log_epoch=<n>\n]", server entries "capacity=<bytes>\n<transport>=<uri>\n...", the root
// znode "region=<id>\n", and the names of region znodes. Each is written and parsed side by side, in
// zookeeper_format.cc (ZooKeeperMembership::ParseRegion and ParseServer with the rest), so the two agree; what does
// not parse is reported as Corruption, never trusted. Internal to membership/.
#pragma once

#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>

#include "cell/status.h"
#include "membership/membership.h"

namespace cell::membership::znode {

// Parses all of `text` as a decimal number into *out; false if it is empty, not a number, out of T's range, or
// followed by anything else.
template <typename T>
bool ParseNumber(std::string_view text, T* out) {
  return !text.empty() &&
         std::from_chars(text.data(), text.data() + text.size(), *out).ptr == text.data() + text.size();
}

// The name of a region's znode under regions/: its id in 8 digits (regions/00000004).
std::string RegionName(uint32_t region);

// The contents of a region's znode: owner and epoch, and log_epoch when it is set.
std::string FormatRegion(const RegionEntry& entry);

// The contents of a server's znode: its capacity, then one line per transport. InvalidArgument for an address that
// cannot be stored in that form (an empty transport, or one holding '=' or a newline; a URI holding a newline).
StatusOr<std::string> FormatServer(const ServerInfo& server);

// The contents of the root znode, which names the root region: "region=<id>\n".
std::string FormatRoot(uint32_t region);
// Parses the root znode's contents into *region; false unless they are "region=<id>\n" with a valid region id.
bool ParseRoot(std::string_view data, uint32_t* region);

}  // namespace cell::membership::znode
