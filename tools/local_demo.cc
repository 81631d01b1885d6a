// cell-local-demo: puts, gets, deletes and scans a few keys in a LocalStore (Cell's tree of meganodes in this process,
// one meganode), and prints what happened.
// A first look at Cell's local tree; later issues replace it with a running server and cellctl.
#include <cstdio>
#include <string>

#include "meganode/local_store.h"

int main() {
  cell::meganode::LocalStoreOptions options;
  options.meganode_bytes = uint64_t{16} << 20;
  options.extent_region_bytes = uint64_t{64} << 20;
  auto store = cell::meganode::LocalStore::Open(options);
  if (!store.ok()) {
    std::fprintf(stderr, "cell-local-demo: %s\n", store.status().ToString().c_str());
    return 1;
  }
  auto& s = **store;
  const int n = 10000;
  for (int i = 0; i < n; ++i) {
    char key[32], value[32];
    std::snprintf(key, sizeof key, "user%06d", i);
    std::snprintf(value, sizeof value, "value-of-%d", i);
    if (auto st = s.Put(key, value); !st.ok()) {
      std::fprintf(stderr, "put %s: %s\n", key, st.ToString().c_str());
      return 1;
    }
  }
  std::printf("put %d keys user000000..user%06d\n", n, n - 1);

  std::string value;
  cell::Status st = s.Get("user004242", &value);
  std::printf("get user004242 -> %s%s\n", st.ok() ? "" : st.ToString().c_str(), value.c_str());
  st = s.Delete("user004242");
  std::printf("del user004242 -> %s\n", st.ToString().c_str());
  st = s.Get("user004242", &value);
  std::printf("get user004242 -> %s\n", st.ToString().c_str());
  st = s.Put(std::string(300, 'k'), "x");
  std::printf("put of a 300-byte key -> %s\n", st.ToString().c_str());

  std::vector<cell::btree::KeyValue> out;
  st = s.Scan("user004240", "user004245", 100, &out);
  std::printf("scan [user004240, user004245) -> %s, %zu pairs\n", st.ToString().c_str(), out.size());
  for (const auto& kv : out) std::printf("  %s = %s\n", kv.key.c_str(), kv.value.c_str());

  cell::btree::BLinkTree::Shape shape;
  st = s.tree().CheckInvariants(&shape);
  std::printf("tree check: %s; height %d, %llu nodes, %llu leaves, %llu keys, %u of %u slots free\n",
              st.ToString().c_str(), shape.height, (unsigned long long)shape.nodes, (unsigned long long)shape.leaves,
              (unsigned long long)shape.entries, s.meganode().free_slots(), s.meganode().num_slots());
  return st.ok() && out.size() == 4 ? 0 : 1;
}
