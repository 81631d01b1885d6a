// verbs://host:port — RDMA through rdma-core (libibverbs + librdmacm).
//
// Connections are RC queue pairs set up with rdma_cm (rdma_bind_addr/rdma_listen/rdma_accept on the server,
// rdma_resolve_addr/route/rdma_connect on the client). Without an RDMA device, Listen and Connect fail with
// "no RDMA device".
//
// Connection set-up. The connect request and the accept carry a 16-byte hello as rdma_cm private data (magic,
// max_message_bytes, receive credits, receive buffer size; see WireHello in verbs_link.h). A server that refuses a
// client rejects with private data "CELL:<reason>".
//
// RPC: SEND/RECV. Each side posts kRecvBuffers = 36 receive buffers of 16 KiB (kBufferBytes) and has 32 registered
// 16 KiB send buffers. Messages are the frames of rpc/frame.h (24-byte header: type, aux = method or status code,
// request id; then the payload), laid end to end in one byte stream per direction; the stream is cut into SENDs of
// at most 16 KiB. A small message usually travels alone in one SEND; small messages queued behind a shortage of
// credits share SENDs; a message larger than 16 KiB spans several consecutive SENDs (RC delivers in order) and is
// reassembled by the receiver. So memory per connection is fixed (~1.1 MiB a side, plus 512 KiB of read slots on
// the client) whatever max_message_bytes is; messages up to the limit (default 16 MiB) still pass.
//
// Credits. Every SEND is IBV_WR_SEND_WITH_IMM; the 32-bit immediate returns credits: bits 0..30 = receive buffers
// the sender has reposted since it last said so, bit 31 = "credit-only" (a SEND with no payload). A side sends a
// data SEND only while it holds a credit (it starts with kCredits = 32, the peer's hello), so the peer never runs
// out of posted buffers. Credits ride on every data SEND; when 16 or more are owed and nothing carries them, an
// explicit credit-only SEND returns them. Credit-only SENDs consume no credit: they land in the 4 extra receive
// buffers (each returns >= 16 of the peer's at most 32 outstanding credits, so at most 2 can be unprocessed), and
// their buffers are reposted without being owed back, so credit messages never ping-pong.
//
// Handshake: once connected, the client's first frames are kHello and, when the server requires a key, kAuth
// (rpc/auth.h); the server answers kHelloReply and kAuthReply, and serves nothing else before: not a request, nor the
// region list with its rkeys. A refused connection is answered with the error (PermissionDenied) and disconnected
// once that answer has been sent.
//
// Internal RPC: kMapRequest (empty) asks for the server's regions; kMapReply carries a proto::VerbsRegionList
// (region id, address, size, rkey).
//
// One-sided reads: IBV_WR_RDMA_READ with the region's rkey into registered 8 KiB bounce slots of the client (64 per
// connection; a larger read is split into pieces), then copied to `dest`; so a read that timed out can never write
// to `dest` later. Reads beyond the free slots wait in a software queue. The client bounds-checks every read
// against its copy of the region list first (fetching the list again once when the region is unknown: regions may
// be registered after clients connect) and refuses out-of-bounds reads with InvalidArgument before posting.
//
// Registration and access: server regions are registered IBV_ACCESS_REMOTE_READ only (never remote write, never
// local write); the send/receive buffers and client read slots are registered IBV_ACCESS_LOCAL_WRITE only.
//
// Threads. Server: one rdma_cm thread (accepts and tears down connections; no request work) and exactly
// `workers` worker threads sharing an epoll set of the connections' completion channels (EPOLLONESHOT: one worker
// at a time drains a connection's CQ, runs the handler for every whole request, and sends the replies). Client:
// one thread per connection waits on the completion channel, the rdma_cm channel (disconnects) and a wake fd,
// runs callbacks and expires deadlines. CQs are armed with ibv_req_notify_cq; nobody busy-polls.
#pragma once

#include <memory>

#include "rpc/transport.h"

namespace cell::rpc::verbs {

StatusOr<std::unique_ptr<Server>> Listen(const Endpoint& endpoint, const ServerOptions& options, RpcHandler* handler);
StatusOr<std::unique_ptr<Connection>> Connect(const Endpoint& endpoint, const ConnectOptions& options);

}  // namespace cell::rpc::verbs
