// LocalStore: opens a GlobalTree of this process alone (see local_store.h).
#include "meganode/local_store.h"

namespace cell::meganode {

StatusOr<std::unique_ptr<LocalStore>> LocalStore::Open(const LocalStoreOptions& options) {
  GlobalTreeOptions o;
  o.meganode_bytes = options.meganode_bytes;
  o.meganodes = options.meganodes;
  o.extent_region_bytes = options.extent_region_bytes;
  o.backing = options.backing;
  o.node_region_id = options.node_region_id;
  o.extent_region_id = options.extent_region_id;
  o.root = true;  // no peers, no write sink: the tree is this process's alone, and not logged
  std::unique_ptr<LocalStore> s(new LocalStore());
  CELL_ASSIGN_OR_RETURN(s->tree_, GlobalTree::Open(o));
  // The first meganode stays at its place for the tree's life (a split keeps the left half there).
  s->first_tree_ = s->tree_->LocalTreeOf(s->tree_->first_meganode());
  s->first_meganode_ = s->tree_->MeganodeOf(s->tree_->first_meganode());
  if (s->first_tree_ == nullptr || s->first_meganode_ == nullptr) {
    return Status::Internal("a new tree has no first meganode here");
  }
  return s;
}

}  // namespace cell::meganode
