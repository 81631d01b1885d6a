// Building, editing and checking 1 KB node images (the layout is documented in node_format.h).
#include "btree/node_format.h"

#include <cstring>

#include "btree/checksum.h"

namespace cell::btree {

uint64_t NodeChecksum(const uint64_t* words, uint64_t version) {
  return Checksum64(words + 2, kNodeSize - 16, version);
}

void NodeView::CopyKeyWords(uint64_t first, uint32_t suffix_word, uint32_t len, std::string* out) const {
  // The words into the stack, then one assign (a resize would first fill the string with zeros, then grow it).
  uint64_t words[(0xff + 7) / 8];  // len is a byte of the node
  out->assign(reinterpret_cast<const char*>(words), GatherKeyWords(first, suffix_word, len, words));
}

uint32_t NodeImage::PlaceKeyWords(uint32_t at, std::string_view key, size_t from_word) {
  uint32_t n = 0;
  for (size_t i = from_word; i < WordsFor(key.size()); ++i) w[at + n++] = RawWordAt(key, i);
  return n;
}

bool NodeImage::Build(const NodeHeader& h, std::string_view min, std::string_view max, const NodeEntry* entries,
                      size_t n) {
  if (n > kMaxEntries) return false;
  uint32_t need = kHeaderWords + FenceWords(min.size()) + FenceWords(max.size());
  for (size_t i = 0; i < n; ++i) {
    bool implicit = h.level > 0 && i == 0;
    need += implicit ? 2 : EntryWords(entries[i].key.size(), h.level);
  }
  if (need > kNodeWords) return false;

  std::memset(w, 0, sizeof(w));
  w[2] = h.meganode.Pack();
  w[3] = uint64_t{h.slot} | (uint64_t(h.level & 0xff) << 32) | (uint64_t(NodeKind::kTreeNode) << 40) |
         (uint64_t{h.flags} << 48) | (uint64_t(n) << 56);
  w[4] = h.right.Pack();
  uint32_t heap = kNodeWords;
  uint32_t min_word = 0, max_word = 0;
  if (!min.empty()) {
    heap -= FenceWords(min.size());
    min_word = heap;
    PlaceKeyWords(heap, min, 0);
  }
  if (!max.empty()) {
    heap -= FenceWords(max.size());
    max_word = heap;
    PlaceKeyWords(heap, max, 0);
  }
  w[5] = uint64_t(min.size()) | (uint64_t{min_word} << 8) | (uint64_t(max.size()) << 16) | (uint64_t{max_word} << 24) |
         (uint64_t{heap} << 32);
  for (size_t i = 0; i < n; ++i) {
    const NodeEntry& e = entries[i];
    std::string_view key = (h.level > 0 && i == 0) ? std::string_view() : std::string_view(e.key);
    uint32_t blob_words = EntryWords(key.size(), h.level) - 2;
    heap -= blob_words;
    uint32_t aux32 = h.level == 0 ? e.value.length : e.child;
    if (h.level == 0) {
      w[heap] = e.value.ptr.Pack();
      w[heap + 1] = e.value.checksum;
      PlaceKeyWords(heap + kLeafPayloadWords, key, 1);
    } else {
      PlaceKeyWords(heap, key, 1);
    }
    w[kHeaderWords + 2 * i] = RawWordAt(key, 0);
    w[kHeaderWords + 2 * i + 1] = uint64_t(key.size()) | (uint64_t{blob_words ? heap : 0} << 8) |
                                  (h.level == 0 && e.value.locked ? kAuxLocked : 0) | (uint64_t{aux32} << 32);
  }
  SetHeapWord(heap);
  return true;
}

void NodeImage::BuildMeganodeHeader(GlobalPtr meganode, uint32_t root_slot, int root_level, const MeganodeInfo& info) {
  // The fences as in a tree node without entries (keys are at most 255 bytes: two fences always fit).
  Build(NodeHeader{meganode, 0, info.level, kFlagValid, info.right}, info.min, info.max, nullptr, 0);
  const uint8_t flags =
      kFlagValid | (info.level > 0 ? kFlagInternalMeganode : 0) | (info.state & (kFlagPending | kFlagSealed));
  w[3] = (uint64_t(info.level & 0xff) << 32) | (uint64_t(NodeKind::kMeganodeHeader) << 40) | (uint64_t{flags} << 48);
  SetRoot(root_slot, root_level);
  SetClusterRoot(info.cluster_root);
}

void NodeImage::MarkFree() {
  NodeHeader h = Header();
  std::memset(w + 4, 0, sizeof(w) - 4 * sizeof(uint64_t));
  w[3] = uint64_t{h.slot} | (uint64_t(h.level & 0xff) << 32) | (uint64_t(NodeKind::kTreeNode) << 40);
  SetHeapWord(kNodeWords);
}

NodeHeader NodeImage::Header() const {
  NodeView v = view();
  return NodeHeader{v.meganode(), v.slot(), v.level(), v.flags(), v.right()};
}

std::vector<NodeEntry> NodeImage::Entries() const {
  NodeView v = view();
  std::vector<NodeEntry> out(v.size());
  for (uint32_t i = 0; i < out.size(); ++i) {
    v.CopyEntryKey(i, &out[i].key);
    if (v.level() == 0)
      out[i].value = v.leaf_value(i);
    else
      out[i].child = v.child_slot(i);
  }
  return out;
}

bool NodeImage::Compact() {
  NodeView v = view();
  std::string min, max;
  v.CopyMinKey(&min);
  v.CopyMaxKey(&max);
  std::vector<NodeEntry> entries = Entries();
  NodeImage fresh;
  if (!fresh.Build(Header(), min, max, entries.data(), entries.size())) return false;
  std::memcpy(w + 2, fresh.w + 2, sizeof(w) - 2 * sizeof(uint64_t));
  return true;
}

bool NodeImage::InsertEntry(uint32_t i, std::string_view key, const LeafValue& value, uint32_t child) {
  NodeView v = view();
  uint32_t n = v.size();
  int level = v.level();
  if (n >= kMaxEntries || i > n) return false;
  uint32_t blob_words = EntryWords(key.size(), level) - 2;
  auto fits = [&] { return kHeaderWords + 2 * (n + 1) + blob_words <= view().heap_word(); };
  if (!fits()) {
    // Compact only if that can make room: the heap words still in use are the fences' and the entries' blobs.
    uint32_t live = FenceWords(v.min_len()) + FenceWords(v.max_len());
    for (uint32_t j = 0; j < n; ++j) live += EntryWords(v.key_len(j), level) - 2;
    if (kHeaderWords + 2 * (n + 1) + live + blob_words > kNodeWords) return false;
    if (!Compact() || !fits()) return false;
  }
  uint32_t heap = view().heap_word() - blob_words;
  if (level == 0) {
    w[heap] = value.ptr.Pack();
    w[heap + 1] = value.checksum;
    PlaceKeyWords(heap + kLeafPayloadWords, key, 1);
  } else {
    PlaceKeyWords(heap, key, 1);
  }
  SetHeapWord(heap);
  uint64_t* slots = w + kHeaderWords;
  std::memmove(slots + 2 * (i + 1), slots + 2 * i, sizeof(uint64_t) * 2 * (n - i));
  uint32_t aux32 = level == 0 ? value.length : child;
  slots[2 * i] = RawWordAt(key, 0);
  slots[2 * i + 1] = uint64_t(key.size()) | (uint64_t{blob_words ? heap : 0} << 8) |
                     (level == 0 && value.locked ? kAuxLocked : 0) | (uint64_t{aux32} << 32);
  SetCount(n + 1);
  return true;
}

void NodeImage::RemoveEntry(uint32_t i) {
  uint32_t n = view().size();
  if (i >= n) return;
  uint64_t* slots = w + kHeaderWords;
  std::memmove(slots + 2 * i, slots + 2 * (i + 1), sizeof(uint64_t) * 2 * (n - i - 1));
  slots[2 * (n - 1)] = slots[2 * (n - 1) + 1] = 0;
  SetCount(n - 1);
}

void NodeImage::SetLeafValue(uint32_t i, const LeafValue& value) {
  uint32_t b = view().blob_word(i);
  w[b] = value.ptr.Pack();
  w[b + 1] = value.checksum;
  uint64_t& aux = w[kHeaderWords + 2 * i + 1];
  aux = (aux & 0xffffull) | (value.locked ? kAuxLocked : 0) | (uint64_t{value.length} << 32);
}

void NodeImage::Seal(uint64_t version) {
  w[0] = version;
  w[1] = NodeChecksum(w, version);
}

CopyCheck CheckCopy(const uint64_t* words, GlobalPtr expected) {
  uint64_t version = words[0];
  if (version == 0) {
    for (size_t i = 1; i < kNodeWords; ++i)
      if (words[i] != 0) return CopyCheck::kTorn;
    return CopyCheck::kFree;
  }
  if (version & 1) return CopyCheck::kBeingWritten;
  if (words[1] != NodeChecksum(words, version)) return CopyCheck::kTorn;
  if (!(NodeView(words).self() == expected)) return CopyCheck::kWrongIdentity;
  return CopyCheck::kOk;
}

}  // namespace cell::btree
