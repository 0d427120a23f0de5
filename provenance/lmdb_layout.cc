#include "provenance/lmdb_layout.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>

#include <spdlog/spdlog.h>

#include "common/unique_fd.h"
#include "provenance/lmdb_meta.h"
#include "provenance/lmdb_replay.h"
#include "provenance/lmdb_sidecar.h"
#include "provenance/lmdb_walk.h"

namespace dlfs::provenance::lmdb {

const char* source_name(LayoutSource s) {
  switch (s) {
    case LayoutSource::sidecar_provenance: return "sidecar (provenance)";
    case LayoutSource::sidecar_explicit: return "sidecar (explicit)";
    case LayoutSource::walk: return "tree walk";
  }
  return "?";
}

namespace {

// The first record (key order) of up to `most` transactions spread over the
// build: where a wrong commit boundary misplaces records first.
std::vector<uint64_t> txn_first_records(const Provenance& p, unsigned most) {
  std::vector<uint64_t> starts;  // insertion indices
  if (p.records == 0 || p.txn_records.empty()) return starts;
  if (p.txn_records.size() == 1) {
    const uint64_t every = std::max<uint64_t>(1, p.txn_records[0]);
    for (uint64_t i = 0; i < p.records; i += every) starts.push_back(i);
  } else {
    uint64_t i = 0;
    for (uint64_t n : p.txn_records) {
      if (i >= p.records) break;
      starts.push_back(i);
      i += n;
    }
  }
  std::vector<uint64_t> out;
  const size_t step = std::max<size_t>(1, starts.size() / most);
  for (size_t t = 0; t < starts.size() && out.size() < most; t += step) {
    const uint64_t idx = starts[t];
    out.push_back(p.key_rank.empty() ? idx : (idx < p.key_rank.size() ? p.key_rank[idx] : idx));
  }
  return out;
}

// The sidecar's locations, checked; an error says why they cannot be used.
Result<Layout> from_sidecar(int fd, const std::string& data, const std::string& side, const MetaKey& actual,
                            const LayoutOptions& options) {
  auto sc = read_sidecar_file(side);
  if (!sc) return sc.status();
  if (!(sc->key == actual))
    return Status(ESTALE, side + " was made for a different database state (" + describe(sc->key) + ") but " + data +
                              " is " + describe(actual));
  Layout l;
  l.key = actual;
  if (sc->locations) {
    l.locations = std::move(*sc->locations);
    l.source = LayoutSource::sidecar_explicit;
  } else {
    auto r = replay(*sc->provenance);
    if (!r) return r.status().with_context(side + ": replaying its provenance");
    if (!(r->meta == actual))
      return Status(EBADMSG, side + ": its provenance predicts a database " + describe(r->meta) + ", but " + data +
                                 " is " + describe(actual));
    l.locations = std::move(r->locations);
    l.source = LayoutSource::sidecar_provenance;
  }
  SpotCheckOptions checks = options.checks;
  if (sc->provenance && checks.records.empty()) checks.records = txn_first_records(*sc->provenance, 16);
  DLFS_RETURN_IF_ERROR(spot_check(fd, data, actual, l.locations, checks, &l.checks)
                           .with_context(side + " fails the spot checks"));
  return l;
}

}  // namespace

Result<Layout> open_layout(const std::string& dir, const LayoutOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string data = dir + "/data.mdb";
  const std::string side = dir + "/" + std::string(kSidecarFileName);
  UniqueFd fd(::open(data.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return Status::from_errno(errno, "LMDB dataset: " + data);
  auto key = read_meta_key(fd.get(), data);
  if (!key) return key.status();
  auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };

  std::string why;
  struct stat st{};
  if (::stat(side.c_str(), &st) == 0) {
    auto l = from_sidecar(fd.get(), data, side, *key, options);
    if (l) {
      l->seconds = seconds();
      return l;
    }
    why = l.status().message();
    if (!options.allow_walk) return l.status();
    spdlog::warn("{}; walking the tree of {} once instead", why, data);
  } else if (!options.allow_walk) {
    return Status(ENOENT, data + " has no sidecar (" + side + "): make one with `dlfs-ctl lmdb sidecar " + dir + "`");
  }
  auto walked = walk_locations(data);
  if (!walked) return walked.status();
  Layout l;
  l.key = *key;
  l.locations = std::move(walked).value();
  l.source = LayoutSource::walk;
  l.why_walk = why;
  l.seconds = seconds();
  if (l.locations.size() != key->entries)  // the file changed under the walk
    return Status(EAGAIN, data + " changed while it was read (" + std::to_string(l.locations.size()) + " records walked, " +
                              std::to_string(key->entries) + " in the meta page)");
  return l;
}

}  // namespace dlfs::provenance::lmdb
