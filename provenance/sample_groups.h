// Sample groups: files that make one sample because they share a key, as
// WebDataset groups the members of a tar shard: `n0153/x.jpg`, `n0153/x.cls`
// and `n0153/x.json` are one sample with key `n0153/x`. A group is a run of
// consecutive files (canonical order: byte-wise by path) with one key, so
// its bytes are one contiguous range of the byte space and everything that
// works on samples (plans, ranks, rounds, striping) works on groups as is.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "provenance/manifest.h"

namespace dlfs::provenance {

// The key of `path` ("a/b/c.tar.gz" -> "a/b/c" by first-dot, "a/b/c.tar" by
// last-dot). A basename without a dot, or whose only dot is its first byte
// (".hidden"), is its own key: the whole path.
std::string_view group_key(std::string_view path, GroupRule rule);

// The first file of each group in canonical order, and file_count() at the end.
std::vector<uint32_t> group_starts(const Manifest& tree, GroupRule rule);

}  // namespace dlfs::provenance
