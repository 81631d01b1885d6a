// The client's side of transactions and atomic batches (include/cell/transaction.h): the
// transaction's optimistic execution and its commit, the coordinator of the protocol in docs/DESIGN.md,
// "Transactions", over StoreClient's requests.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "cell/transaction.h"
#include "client/store_client.h"

namespace cell::client {

StatusOr<std::unique_ptr<Transaction>> NewTransaction(StoreClient& store, const TransactionOptions& options);
Status WriteBatchAtomically(StoreClient& store, const WriteBatch& batch);

}  // namespace cell::client
