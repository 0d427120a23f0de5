#include "fs/dataset/audience.h"

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdlib>
#include <map>

#include <spdlog/fmt/fmt.h>

#include "common/user_db.h"

namespace dlfs::fs {
namespace {

constexpr unsigned kRead = 4, kSearch = 1;

std::string mode_text(bool dir, uint32_t mode) {
  std::string s = dir ? "d" : "-";
  for (int shift = 6; shift >= 0; shift -= 3)
    for (auto [bit, ch] : {std::pair{4u, 'r'}, {2u, 'w'}, {1u, 'x'}}) s += (mode >> shift) & bit ? ch : '-';
  return s;
}

std::string who(unsigned cls, uint32_t uid, uint32_t gid) {
  if (cls == kOwnerClass) return "user " + user_name(uid) + " (" + std::to_string(uid) + ")";
  if (cls == kGroupClass) return "group " + group_name(gid) + " (" + std::to_string(gid) + ")";
  return "other users";
}

// What each class of users may do on one backend node, for an audience of
// owner U and group G. A class may do it when every user the class can hold
// may: the kernel judges a user by the node's owner bits if the user owns
// it, else by its group bits if the user is in its group, else by its other
// bits; what the database cannot tell (who else is in which group) counts
// against the class.
class ClassRules {
 public:
  ClassRules(uint32_t owner, uint32_t group) : U_(owner), G_(group), owner_groups_(groups_of_user(owner)) {}

  // The classes that have every bit of `bits` (kRead, kSearch) on the node.
  unsigned classes(uint32_t mode, provenance::Owner o, unsigned bits) {
    const Facts& f = facts(o);
    auto has = [&](int shift) { return ((mode >> shift) & bits) == bits; };
    const bool owner_bit = has(6), group_bit = has(3), other_bit = has(0);
    unsigned c = 0;
    // U: root may do anything; else as the kernel sees U.
    if (U_ == 0 || (o.uid == U_ ? owner_bit : f.owner_in_file_group ? group_bit : other_bit)) c |= kOwnerClass;
    // A member of G other than U: the node's owner (if that user is in G),
    // in the node's group (surely if that is G, maybe if not), or neither.
    if ((!f.node_owner_in_G || owner_bit) && group_bit && (o.gid == G_ || other_bit)) c |= kGroupClass;
    // Anyone else: the node's owner (if that user is neither U nor in G),
    // in the node's group (maybe, if that is not G), or neither.
    if (other_bit && (o.gid == G_ || group_bit) && (o.uid == U_ || f.node_owner_in_G || owner_bit)) c |= kOtherClass;
    return c;
  }

 private:
  struct Facts {
    bool owner_in_file_group = false;  // U is in the node's group
    bool node_owner_in_G = false;      // the node's owner is not U and is in G
  };
  const Facts& facts(provenance::Owner o) {
    auto key = (static_cast<uint64_t>(o.uid) << 32) | o.gid;
    if (last_ && last_->first == key) return last_->second;  // files come in runs of one owner
    auto it = facts_.find(key);
    if (it != facts_.end()) return (last_ = &*it)->second;
    Facts f;
    f.owner_in_file_group = std::binary_search(owner_groups_.begin(), owner_groups_.end(), o.gid);
    if (o.uid != U_) {
      auto g = groups_.find(o.uid);
      if (g == groups_.end()) g = groups_.emplace(o.uid, groups_of_user(o.uid)).first;
      f.node_owner_in_G = std::binary_search(g->second.begin(), g->second.end(), G_);
    }
    last_ = &*facts_.emplace(key, f).first;
    return last_->second;
  }

  const uint32_t U_, G_;
  const std::vector<uint32_t> owner_groups_;
  std::map<uint32_t, std::vector<uint32_t>> groups_;  // by uid
  std::map<uint64_t, Facts> facts_;                   // by (uid, gid)
  const std::pair<const uint64_t, Facts>* last_ = nullptr;
};

// The classes that may do what a dataset's views reveal, and for each class
// kept out, the first node that keeps it out.
struct Walk {
  unsigned classes = kAllClasses;
  std::array<std::string, 3> reason;  // by class: owner, group, other

  void narrow(unsigned allowed, const std::string& why) {
    for (unsigned cls : {kOwnerClass, kGroupClass, kOtherClass}) {
      if ((classes & cls) && !(allowed & cls)) reason[index(cls)] = why;
    }
    classes &= allowed;
  }
  static size_t index(unsigned cls) { return cls == kOwnerClass ? 0 : cls == kGroupClass ? 1 : 2; }
};

std::string node_text(bool dir, uint32_t mode, provenance::Owner o) {
  return "(" + mode_text(dir, mode) + " " + std::to_string(o.uid) + ":" + std::to_string(o.gid) + ")";
}

// The directories above the backend directory, each needing search.
void walk_parents(const std::string& backend, ClassRules& rules, Walk& walk) {
  char resolved[PATH_MAX];
  std::string path = ::realpath(backend.c_str(), resolved) ? resolved : backend;
  while (path.size() > 1) {
    auto slash = path.rfind('/');
    path = slash == 0 ? "/" : path.substr(0, slash);
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) continue;
    const uint32_t mode = st.st_mode & 07777;
    const provenance::Owner o{st.st_uid, st.st_gid};
    walk.narrow(rules.classes(mode, o, kSearch),
                "cannot search " + path + " " + node_text(true, mode, o) + ", above the backend directory");
  }
}

// The classes that can list every directory and read every file of the
// dataset, through the backend directory's parents.
Walk walk_dataset(const std::string& backend, const provenance::Manifest& m, ClassRules& rules) {
  Walk walk;
  walk_parents(backend, rules, walk);
  for (uint32_t d = 0; d < m.dir_count() && walk.classes; ++d) {
    const uint32_t mode = m.dir_mode(d);
    const auto o = m.dir_owner(d);
    walk.narrow(rules.classes(mode, o, kRead | kSearch),
                "cannot list raw/" + m.dir_path(d) + " " + node_text(true, mode, o));
  }
  for (uint32_t f = 0; f < m.file_count() && walk.classes; ++f) {
    const uint32_t mode = m.file_mode(f);
    const auto o = m.file_owner(f);
    // Most files are alike: the rules' answer for this file decides nothing new.
    const unsigned allowed = rules.classes(mode, o, kRead);
    if ((walk.classes & allowed) != walk.classes)
      walk.narrow(allowed, "cannot read raw/" + m.file_path(f) + " " + node_text(false, mode, o));
  }
  return walk;
}

unsigned classes_of(uint32_t mode) {
  return ((mode & 0400) ? kOwnerClass : 0) | ((mode & 040) ? kGroupClass : 0) | ((mode & 04) ? kOtherClass : 0);
}
uint32_t read_bits(unsigned classes) {
  return ((classes & kOwnerClass) ? 0400 : 0) | ((classes & kGroupClass) ? 040 : 0) | ((classes & kOtherClass) ? 04 : 0);
}

std::string readers_text(const Audience& a) {
  const unsigned c = classes_of(a.mode);
  if (c == kAllClasses) return "everyone";
  if (c == 0 || (c == kOwnerClass && a.uid == 0)) return "root only";
  std::string out;
  auto add = [&](const std::string& s) { out += (out.empty() ? "" : ", ") + s; };
  if (c & kOwnerClass) add(who(kOwnerClass, a.uid, a.gid));
  if (c & kGroupClass) add(who(kGroupClass, a.uid, a.gid));
  if (c & kOtherClass) add("users outside group " + group_name(a.gid) + " (" + std::to_string(a.gid) + ")");
  return out;
}

std::string closed_text(const Walk& walk, unsigned classes, const Audience& a) {
  std::string out;
  for (unsigned cls : {kOwnerClass, kGroupClass, kOtherClass}) {
    if (!(classes & cls) || (walk.classes & cls)) continue;
    out += (out.empty() ? "" : "; ") + who(cls, a.uid, a.gid) + " " + walk.reason[Walk::index(cls)];
  }
  return out;
}

}  // namespace

bool Audience::may_read(const Reader& r) const {
  if (r.uid == 0) return true;
  if (r.uid == uid) return mode & 0400;
  if (r.gid == gid || std::find(r.groups.begin(), r.groups.end(), gid) != r.groups.end()) return mode & 040;
  return mode & 04;
}

bool Audience::more_open_than_backend() const { return (classes_of(mode) & ~backend_classes) != 0; }

Result<Audience> audience_of(const DatasetConfig& config, const provenance::Manifest& m) {
  Audience a;
  const auto root = m.dir_owner(provenance::kRootDir);
  a.uid = root.uid;
  a.gid = root.gid;
  if (!config.view_owner.empty()) {
    DLFS_ASSIGN_OR_RETURN(a.uid, resolve_user(config.view_owner));
  }
  if (!config.view_group.empty()) {
    DLFS_ASSIGN_OR_RETURN(a.gid, resolve_group(config.view_group));
  }

  {  // raw/'s top directory: what the backend directory's parents let through
    ClassRules rules(root.uid, root.gid);
    Walk parents;
    walk_parents(config.backend, rules, parents);
    a.raw_root_classes = parents.classes;
  }
  ClassRules rules(a.uid, a.gid);
  const Walk walk = walk_dataset(config.backend, m, rules);
  a.backend_classes = walk.classes;
  if (config.view_mode.empty()) {
    a.mode = read_bits(walk.classes);
    a.why = walk.classes == kAllClasses ? "derived from the backend: every user can read every file"
                                        : "derived from the backend: " + closed_text(walk, kAllClasses, a);
  } else {
    DLFS_ASSIGN_OR_RETURN(uint32_t mode, parse_view_mode(config.view_mode));
    a.mode = mode & 0444;
    a.configured = true;
    a.why = fmt::format("configured: view_mode {:04o}", a.mode);
    const unsigned beyond = classes_of(a.mode) & ~walk.classes;
    if (beyond) a.why += ", more open than the backend: " + closed_text(walk, beyond, a);
  }
  a.readers = readers_text(a);
  return a;
}

}  // namespace dlfs::fs
