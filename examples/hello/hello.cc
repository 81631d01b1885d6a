// cell-hello CLUSTER: puts three keys, reads one back by server-side and by client-side search, scans them, moves a
// value between two of them in a transaction, and deletes them. Exits 0 if every step did what it should.
#include <cell/client.h>
#include <cell/transaction.h>

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace {
int Fail(const char* what, const cell::Status& s) {
  std::fprintf(stderr, "cell-hello: %s: %s\n", what, s.ToString().c_str());
  return 1;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: cell-hello CLUSTER (zk://host:port/root/cluster or tcp://host:port)\n");
    return 2;
  }
  for (const char* search : {"server", "client"}) {
    cell::ClientOptions options;
    options.cluster = argv[1];
    options.search = search;
    auto client = cell::Client::Open(options);
    if (!client.ok()) return Fail("open", client.status());
    for (const char* key : {"hello/1", "hello/2", "hello/3"}) {
      if (cell::Status s = (*client)->Put(key, std::string("value of ") + key); !s.ok()) return Fail("put", s);
    }
    std::string value;
    if (cell::Status s = (*client)->Get("hello/2", &value); !s.ok()) return Fail("get", s);
    std::printf("%s-side get hello/2 -> %s\n", search, value.c_str());
    std::vector<std::pair<std::string, std::string>> pairs;
    if (cell::Status s = (*client)->Scan("hello/", "hello0", 10, &pairs); !s.ok()) return Fail("scan", s);
    std::printf("%s-side scan: %zu pairs\n", search, pairs.size());
    if (value != "value of hello/2" || pairs.size() != 3) return 1;
    // A transaction: hello/1 takes hello/3's value, and hello/3 is deleted, together.
    cell::Status moved = cell::RunTransaction(**client, [](cell::Transaction& txn) -> cell::Status {
      std::string v;
      CELL_RETURN_IF_ERROR(txn.Get("hello/3", &v));
      CELL_RETURN_IF_ERROR(txn.Put("hello/1", v));
      return txn.Delete("hello/3");
    });
    if (!moved.ok()) return Fail("transaction", moved);
    if (cell::Status s = (*client)->Get("hello/1", &value); !s.ok() || value != "value of hello/3") return 1;
    pairs.clear();
    if (cell::Status s = (*client)->Scan("hello/", "hello0", 10, &pairs); !s.ok()) return Fail("scan", s);
    std::printf("%s-side transaction: %zu pairs left\n", search, pairs.size());
    if (pairs.size() != 2) return 1;
    for (const auto& [key, v] : pairs) {
      if (cell::Status s = (*client)->Delete(key); !s.ok()) return Fail("delete", s);
    }
    if (!(*client)->Get("hello/2", &value).IsNotFound()) return 1;
  }
  std::printf("ok\n");
  return 0;
}
