// libFuzzer target for the frame decoder: arbitrary bytes, cut into arbitrary pieces, must never crash the decoder,
// make it return a frame whose payload lies outside what was fed, or accept a frame over the limit.
//
//   cmake -B build-fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCELL_FUZZ=ON -DCELL_BUILD_TESTS=OFF \
//     -DCELL_BUILD_BENCH=OFF && ninja -C build-fuzz rpc_frame_fuzz
//   build-fuzz/bin/rpc_frame_fuzz -max_total_time=60 -print_final_stats=1
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "rpc/frame.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  constexpr uint32_t kLimit = 4096;
  cell::rpc::FrameDecoder decoder(kLimit);
  // The first byte picks the piece size, so the fuzzer explores partial headers and payloads too.
  const size_t piece = 1 + data[0] % 64;
  std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  size_t fed = 0, returned = 0;
  while (!input.empty()) {
    const std::string_view chunk = input.substr(0, piece);
    input.remove_prefix(chunk.size());
    decoder.Append(chunk);
    fed += chunk.size();
    cell::rpc::FrameHeader header;
    std::string_view payload;
    cell::rpc::FrameDecoder::Result r;
    while ((r = decoder.Next(&header, &payload)) == cell::rpc::FrameDecoder::Result::kFrame) {
      if (header.length > kLimit || payload.size() != header.length) std::abort();
      returned += cell::rpc::kFrameHeaderBytes + payload.size();
      if (returned > fed) std::abort();
    }
    if (r == cell::rpc::FrameDecoder::Result::kMalformed) {
      if (decoder.error().ok()) std::abort();
      return 0;
    }
    decoder.Consume();
    if (decoder.buffered() != fed - returned) std::abort();
  }
  return 0;
}
