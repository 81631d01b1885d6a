// The optional NIC model of the shm transport: makes the "network" a bottleneck, as an RDMA NIC is.
//
// A real NIC serves one-sided reads at a bounded rate (Cell's 20 Gb/s NIC: about 1.04M 1 KB reads/s) and adds wire
// latency. Shared-memory reads have neither, so a server may impose both on every shm client:
//
//   --nic-model=reads_per_s=1040000,bytes_per_s=2.5e9,latency_us=3
//
// Each read occupies the NIC for max(1 / reads_per_s, bytes / bytes_per_s) seconds; reads are served one after
// another in the order they reserve the NIC (a pacer whose clock, "the NIC is busy until T", lives in a memory word
// shared by the server and all its shm clients), and each completes latency_us after its turn ends.
#pragma once

#include <atomic>
#include <cstdint>
#include <string_view>

#include "cell/status.h"
#include "rpc/transport.h"

namespace cell::rpc::shm {

struct NicModel {
  double reads_per_s = 0;  // 0: no limit
  double bytes_per_s = 0;  // 0: no limit
  double latency_us = 0;

  bool enabled() const { return reads_per_s > 0 || bytes_per_s > 0 || latency_us > 0; }
  // Parses "reads_per_s=R,bytes_per_s=B,latency_us=L" (any subset, any order; empty: disabled).
  static StatusOr<NicModel> Parse(std::string_view spec);
  // How long a read of `bytes` occupies the NIC.
  int64_t BusyNanos(uint32_t bytes) const;
};

// When a read of `busy_ns` issued now completes, given the shared "NIC busy until" word (nanoseconds on the
// steady clock, which all processes of a host share); advances that word.
Clock::time_point ReserveNic(std::atomic<int64_t>* busy_until_ns, int64_t busy_ns, int64_t latency_ns);

}  // namespace cell::rpc::shm
