// DirContexts: small ids for the directories whose names do not fit an
// inode number's 40-bit index (fs/namespace/inode.h): the ones under
// seeds/<s>/ (a 64-bit seed) and under a view directory's resume/ (the
// consumed counts of every rank). Such a directory's inode carries its id;
// a world directory inside one (seeds/<s>/epochs/<e>/<W>,
// .../resume/<consumed>/<W'>) carries the id of its parent and its W.
//
// Pinned like view ids (fs/views/view_registry.h): id_of() and pin() take
// one pin, which the caller hands to the kernel (a lookup reply, a
// readdirplus entry: released by FORGET) or releases at once. At most
// kMaxDirContexts ids exist per dataset; past that, the id of a context
// nobody pins is given to the next one. Thread safe (one mutex; lookups,
// listings and forgets take it, reads never).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "common/status.h"
#include "fs/views/view_context.h"

namespace dlfs::fs {

enum class DirLevel : uint8_t {
  seed,         // seeds/<s>
  seed_epochs,  // seeds/<s>/epochs
  epoch,        // seeds/<s>/epochs/<e>: world directories below
  resume,       // [seeds/<s>/]epochs/<e>/<W>/resume
  consumed,     // .../resume/<consumed>: world directories (W') below
};

struct DirKey {
  DirLevel level = DirLevel::seed;
  uint64_t seed = 0;
  bool seeded = false;      // under seeds/<s>/ (else epochs/, the configured seed)
  uint32_t epoch = 0;       // epoch, resume, consumed
  uint32_t world = 0;       // resume, consumed: the W whose ranks consumed
  std::string consumed;     // consumed: the path component naming the counts
  auto fields() const { return std::tie(level, seed, seeded, epoch, world, consumed); }
  bool operator<(const DirKey& o) const { return fields() < o.fields(); }
  bool operator==(const DirKey& o) const { return fields() == o.fields(); }
};

struct DirContext {
  DirKey key;
  // epoch and consumed levels: the context of the views below (shared by them).
  std::shared_ptr<const ViewContext> views;
};

class DirContexts {
 public:
  explicit DirContexts(uint64_t max_ids) : max_ids_(max_ids) {}
  // The id of `key`, pinned once; a new id keeps `views` as its views' context.
  Result<uint32_t> id_of(const DirKey& key, std::shared_ptr<const ViewContext> views);
  // One more pin of an id the caller holds a pin of (its parent's inode).
  void pin(uint32_t id);
  void release(uint32_t id, uint64_t count = 1);
  std::optional<DirContext> get(uint32_t id) const;
  struct Usage {
    uint64_t ids = 0, pinned = 0, recycled = 0;
  };
  Usage usage() const;

 private:
  struct Slot {
    DirContext context;
    uint64_t pins = 0;
  };
  const uint64_t max_ids_;
  mutable std::mutex mu_;
  std::vector<Slot> slots_;
  std::map<DirKey, uint32_t> ids_;
  uint32_t next_victim_ = 0;
  uint64_t recycled_ = 0;
};

}  // namespace dlfs::fs
