// Inode numbers: a pure function of (dataset, kind, index).
//
// DLFS keeps no inode table. Every node of the namespace has a number that
// can be computed from what it is, so lookups allocate nothing, numbers are
// stable across restarts (same backend, same numbers) and the kernel may cache
// them for as long as it likes.
//
//   1                      the mount root
//   2, 3                   /.dlfs and /.dlfs/stats
//   (d+1)<<48 | kind<<40 | index     everything that belongs to dataset d
//   1<<40 | n              generated files (fs/namespace/generated_files.h): a new
//                          number each time such a name is looked up
//
// index is a manifest directory or file id (< 2^40), kind says which table;
// for epoch views it packs the epoch, world size, view id or position. View
// files and directory-view entries carry their view format's number
// (fs/views/view_formats.cc) in the kind byte: 16 + format, 48 + format.
//
// Directories named by more than 40 bits (a seed of 64 bits, a resumed
// epoch's consumed counts: seeds/<s>/..., epochs/<e>/<W>/resume/...) carry a
// small id of a directory context instead (fs/namespace/dir_contexts.h),
// pinned while the kernel may name the inode, as view ids are.
#pragma once

#include <cstdint>
#include <optional>

namespace dlfs::fs {

enum class NodeKind : uint8_t {
  root = 0,
  control_dir = 1,   // /.dlfs
  stats_file = 2,    // /.dlfs/stats
  dataset_dir = 3,   // /<dataset>
  raw_dir = 4,       // /<dataset>/raw/<dir>   (index = manifest dir id; 0 = raw/ itself)
  raw_file = 5,      // /<dataset>/raw/<file>  (index = manifest file id)
  epochs_dir = 6,    // /<dataset>/epochs
  epoch_dir = 7,     // /<dataset>/epochs/<e>          (index = e)
  world_dir = 8,     // /<dataset>/epochs/<e>/<W>      (index = e << 16 | W)
  view = 9,          // .../<W>/<r><extension>         (index = view id, fs/views/view_registry.h; format)
  view_entry = 10,   // .../<W>/<r>/<k>-<name>         (index = view id << 24 | k; format: the directory view's)
  generated = 11,    // stats or an opportunistic stream, as of one lookup (index = its number)
  seeds_dir = 12,    // /<dataset>/seeds
  context_dir = 13,  // seeds/<s>, seeds/<s>/epochs, .../<e>, .../<W>/resume, .../resume/<consumed>
                     // (index = directory context id, fs/namespace/dir_contexts.h)
  context_world_dir = 14,  // seeds/<s>/epochs/<e>/<W> and .../resume/<consumed>/<W'>
                           // (index = context id << 16 | W)
};

inline constexpr uint8_t kViewKindBase = 16;   // kind byte of a view: 16 + format
inline constexpr uint8_t kEntryKindBase = 48;  // kind byte of a directory view's entry: 48 + format
inline constexpr uint8_t kMaxFormatNumber = 31;

inline constexpr uint64_t kMaxEpoch = (1ull << 24) - 1;      // epoch << 16 must fit the index
inline constexpr uint64_t kMaxEntryPosition = (1ull << 24) - 1;
inline constexpr uint64_t kMaxDirContexts = (1ull << 24) - 1;  // context id << 16 | W must fit the index

struct NodeId {
  NodeKind kind = NodeKind::root;
  uint32_t dataset = 0;  // meaningful for dataset kinds
  uint64_t index = 0;    // manifest id for raw kinds
  uint8_t format = 0;    // view and view_entry: the view format's number
};

inline constexpr uint64_t kRootIno = 1;
inline constexpr uint64_t kControlDirIno = 2;
inline constexpr uint64_t kStatsIno = 3;
inline constexpr uint32_t kMaxDatasets = 0xffff;
inline constexpr uint64_t kMaxIndex = (1ull << 40) - 1;
inline constexpr uint64_t kGeneratedBase = 1ull << 40;  // no dataset: below (0+1) << 48

inline uint64_t encode_ino(const NodeId& n) {
  switch (n.kind) {
    case NodeKind::root: return kRootIno;
    case NodeKind::control_dir: return kControlDirIno;
    case NodeKind::stats_file: return kStatsIno;
    case NodeKind::generated: return kGeneratedBase + (n.index & kMaxIndex);
    default: {
      uint64_t kind = static_cast<uint64_t>(n.kind);
      if (n.kind == NodeKind::view) kind = kViewKindBase + n.format;
      if (n.kind == NodeKind::view_entry) kind = kEntryKindBase + n.format;
      return (static_cast<uint64_t>(n.dataset + 1) << 48) | (kind << 40) | (n.index & kMaxIndex);
    }
  }
}

// nullopt for numbers DLFS never hands out.
inline std::optional<NodeId> decode_ino(uint64_t ino) {
  if (ino == kRootIno) return NodeId{NodeKind::root, 0, 0};
  if (ino == kControlDirIno) return NodeId{NodeKind::control_dir, 0, 0};
  if (ino == kStatsIno) return NodeId{NodeKind::stats_file, 0, 0};
  uint64_t ds = ino >> 48;
  if (ds == 0) {
    if (ino < kGeneratedBase) return std::nullopt;
    return NodeId{NodeKind::generated, 0, ino - kGeneratedBase};
  }
  auto kind = static_cast<uint8_t>((ino >> 40) & 0xff);
  const auto dataset = static_cast<uint32_t>(ds - 1);
  const uint64_t index = ino & kMaxIndex;
  if (kind >= kViewKindBase && kind <= kViewKindBase + kMaxFormatNumber)
    return NodeId{NodeKind::view, dataset, index, static_cast<uint8_t>(kind - kViewKindBase)};
  if (kind >= kEntryKindBase && kind <= kEntryKindBase + kMaxFormatNumber)
    return NodeId{NodeKind::view_entry, dataset, index, static_cast<uint8_t>(kind - kEntryKindBase)};
  const bool tree = kind >= static_cast<uint8_t>(NodeKind::dataset_dir) && kind <= static_cast<uint8_t>(NodeKind::world_dir);
  const bool contexts =
      kind >= static_cast<uint8_t>(NodeKind::seeds_dir) && kind <= static_cast<uint8_t>(NodeKind::context_world_dir);
  if (!tree && !contexts) return std::nullopt;
  return NodeId{static_cast<NodeKind>(kind), dataset, index};
}

}  // namespace dlfs::fs
