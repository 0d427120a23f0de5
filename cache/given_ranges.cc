#include "cache/given_ranges.h"

#include <algorithm>
#include <utility>

namespace dlfs::cache {

void GivenRanges::add(uint64_t e, uint64_t begin, uint64_t end) {
  if (begin >= end) return;
  std::vector<Range>& v = shards_[e % kShards].by_extent[e];
  // The first range that ends at or after `begin`: everything before it is
  // left of the new range and does not touch it.
  auto first = std::lower_bound(v.begin(), v.end(), begin, [](const Range& r, uint64_t b) { return r.end < b; });
  auto last = first;
  while (last != v.end() && last->begin <= end) {  // overlapping or adjacent: merge
    begin = std::min(begin, last->begin);
    end = std::max(end, last->end);
    ++last;
  }
  first = v.erase(first, last);
  v.insert(first, Range{begin, end});
}

std::vector<GivenRanges::Range> GivenRanges::take(uint64_t e) {
  auto& map = shards_[e % kShards].by_extent;
  auto it = map.find(e);
  if (it == map.end()) return {};
  std::vector<Range> v = std::move(it->second);
  map.erase(it);
  return v;
}

}  // namespace dlfs::cache
