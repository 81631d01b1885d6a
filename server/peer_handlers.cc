// How a StoreService answers the MEGA_* requests other servers send it while they split meganodes onto it
// (server/peers.h sends them): create a sealed meganode, fill it, unseal or abandon it, insert a separator. Each answer
// leaves only once what it reports is durable, and only under the lease, as a store answer does (docs/DESIGN.md,
// "Ownership", rules 1 and 5): a server paused past its session, resumed, must not tell a peer that a meganode was
// made, filled or unsealed, or a separator inserted, in regions a survivor has recovered without it.
#include <fmt/format.h>

#include <string_view>
#include <vector>

#include "rpc/proto/store.pb.h"
#include "server/store_service.h"

namespace cell::server {

using proto::StoreMethod;

void StoreService::HandlePeer(uint16_t method, std::string_view request, rpc::Responder responder,
                              const std::function<Status()>* lease) {
  proto::MegaReply reply;
  Status s;
  switch (method) {
    case StoreMethod::MEGA_CREATE: {
      proto::MegaCreate create;
      if (!ParseStoreRequest(request, &create, responder)) return;
      btree::MeganodeInfo info;
      info.min = create.info().min();
      info.max = create.info().max();
      info.right = GlobalPtr::Unpack(create.info().right());
      info.level = create.info().level();
      auto m = store_->CreateSealed(info, create.token());
      if (!m.ok()) return responder.Fail(m.status());  // (nothing made: no lease needed to say so)
      reply.set_meganode(m->ptr.Pack());
      reply.set_generation(m->generation);
      break;
    }
    case StoreMethod::MEGA_FILL: {
      proto::MegaFill fill;
      if (!ParseStoreRequest(request, &fill, responder)) return;
      std::vector<meganode::MovedEntry> entries(fill.entries_size());
      for (int i = 0; i < fill.entries_size(); ++i) {
        entries[i].key = fill.entries(i).key();
        entries[i].value = fill.entries(i).value();
        entries[i].child = GlobalPtr::Unpack(fill.entries(i).child());
        entries[i].version = fill.entries(i).version();
        entries[i].locked = fill.entries(i).locked();
      }
      s = store_->Fill(meganode::RemoteMeganode{GlobalPtr::Unpack(fill.meganode()), fill.generation()}, entries);
      break;
    }
    case StoreMethod::MEGA_UNSEAL:
    case StoreMethod::MEGA_ABANDON: {
      proto::MegaRef ref;
      if (!ParseStoreRequest(request, &ref, responder)) return;
      const meganode::RemoteMeganode m{GlobalPtr::Unpack(ref.meganode()), ref.generation()};
      if (method == StoreMethod::MEGA_ABANDON && ref.token() != 0) {
        s = store_->AbandonCreated(ref.token());
      } else {
        s = method == StoreMethod::MEGA_UNSEAL ? store_->Unseal(m) : store_->Abandon(m);
      }
      break;
    }
    case StoreMethod::MEGA_INSERT_SEPARATOR: {
      proto::SeparatorRequest r;
      if (!ParseStoreRequest(request, &r, responder)) return;
      const GlobalPtr at = GlobalPtr::Unpack(r.at());
      if (!(at == store_->first_meganode()) && !store_->IsLocal(at)) {
        return responder.Fail(Status::FailedPrecondition(
            fmt::format("server {} does not hold meganode {}:{}", server_id_, at.region, at.offset)));
      }
      // The level, key and child are checked by the tree, against what it holds.
      s = store_->InsertSeparator(at, r.level(), r.separator(), GlobalPtr::Unpack(r.child()));
      break;
    }
    default:
      return responder.Fail(Status::InvalidArgument(fmt::format("unknown store method {}", method)));
  }
  if (s.ok()) s = Commit(/*flush=*/true);  // what the peer is told was done is durable, whatever the durability
  if (s.ok()) s = MayAnswer(lease);        // (a create is then abandoned by its token, the rest tried again)
  if (!s.ok()) return responder.Fail(s);
  responder.Reply(reply.SerializeAsString());
}

}  // namespace cell::server
