// The Iterator of cell/iterator.h over pages of a range: one implementation for the client's iterators and for a
// transaction's, which differ only in how a page is read (a plain scan, or a transaction's recorded scan).
//
// It keeps one page in key order and a position in it. Moving past either end of the page reads the next page in
// that direction (a forward page after the last key, a reverse page before the first), each one asking for twice
// as many pairs as the last in the same direction (from IteratorOptions::initial_pairs up to max_pairs, and fewer when
// the pairs read so far say max_bytes would be passed). A page that came back shorter than asked means the range has
// nothing more that way, and the iterator then stops there without asking again.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cell/iterator.h"

namespace cell::client {

using Pairs = std::vector<std::pair<std::string, std::string>>;
// Reads up to `limit` pairs with start <= key < end (empty end: no bound) into *out (empty on entry): ascending, or
// descending (the greatest first) if `reverse`.
using PageReader =
    std::function<Status(std::string_view start, std::string_view end, size_t limit, bool reverse, Pairs* out)>;

// `invalid`: not OK when the options were refused; the iterator then stays invalid with that status.
std::unique_ptr<Iterator> NewPagedIterator(const IteratorOptions& options, PageReader read, Status invalid);

// Checks an IteratorOptions: bounds of at most kMaxKeySize bytes, lower < upper where both are set, page sizes >= 1.
Status CheckIteratorOptions(const IteratorOptions& options);

}  // namespace cell::client
