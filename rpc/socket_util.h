// Socket plumbing shared by the stream transports (tcp, shm): listening, connecting with a deadline, blocking
// exchanges for connection set-up, passing descriptors over Unix sockets; and the servers' threads' wait for work
// (the verbs server's too).
#pragma once

#include <sys/epoll.h>
#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "cell/status.h"
#include "rpc/frame.h"
#include "rpc/transport.h"

namespace cell::rpc {

// A listening socket on host:port (port 0: any free port; the bound port is stored in *bound_port).
StatusOr<int> ListenTcp(const std::string& host, uint16_t port, uint16_t* bound_port);
// A listening Unix stream socket at `path` (a stale socket file left by a dead server is replaced). The file gets
// `mode` and, if `group` is not -1, that group before the socket listens, so nobody connects through a wider mode.
StatusOr<int> ListenUnix(const std::string& path, mode_t mode, gid_t group);

// A connected, non-blocking socket, or Unavailable saying why (refused, unreachable, timed out).
StatusOr<int> ConnectTcp(const std::string& host, uint16_t port, Clock::time_point deadline);
StatusOr<int> ConnectUnix(const std::string& path, Clock::time_point deadline);

// Blocking (poll-based) exchanges on a non-blocking socket, for connection set-up only.
Status SendAllBy(int fd, std::string_view bytes, Clock::time_point deadline);
// Receives one whole frame into `decoder` and returns it; the payload stays valid until the decoder's Consume().
Status ReceiveFrameBy(int fd, FrameDecoder& decoder, Clock::time_point deadline, FrameHeader* header,
                      std::string_view* payload);
// Sends `bytes` with descriptor `fd_to_pass` attached (SCM_RIGHTS); the bytes must fit the socket buffer.
Status SendWithDescriptor(int fd, std::string_view bytes, int fd_to_pass, Clock::time_point deadline);
// Receives exactly `length` bytes and, if one arrived with them, a descriptor (-1 otherwise).
Status ReceiveWithDescriptor(int fd, char* out, size_t length, int* received_fd, Clock::time_point deadline);

// How much a receive asks the kernel for at a time (more when a frame being decoded needs it).
inline constexpr size_t kReceiveChunk = 64 * 1024;

// Sends (*out)[*sent..] without blocking, advancing *sent; once everything is sent, empties *out and zeroes *sent.
// False if the socket failed (true when it merely would block).
bool SendQueued(int fd, std::string* out, size_t* sent);

void SetNoDelay(int fd);
// Pins the calling thread to `cpu`; logs (does not fail) when the CPU does not exist.
void PinThisThread(int cpu, const char* what);
// Waits for one event of `epoll_fd` into *ev, as epoll_wait(epoll_fd, ev, 1, -1) does (its result and errno), but
// first polls the set without sleeping for `poll` from the call (a server thread calls it once it has served what it
// took last). A server thread that polls takes the next request without being woken: a sleeping
// thread is woken by the sender's kernel with an interrupt to its CPU, which in a VM costs the sender microseconds
// of its own CPU and the request as much latency. The price is the poller's core while it polls, so it is for
// threads with cores of their own (ServerOptions::poll).
int WaitForEvent(int epoll_fd, epoll_event* ev, std::chrono::microseconds poll);
// CPU seconds the calling thread has used.
double ThreadCpuSeconds();

}  // namespace cell::rpc
