#include "common/user_db.h"

#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <optional>

namespace dlfs {
namespace {

// getpw*_r and getgr*_r want a buffer whose size they cannot tell us in
// advance (a group with many members needs more than sysconf's hint). The
// entry's strings live in that buffer: `use` reads them while it exists.
template <typename Entry, typename Lookup, typename Use>
bool with_entry(Lookup&& lookup, Use&& use) {
  std::vector<char> buf(16384);
  for (;;) {
    Entry entry{};
    Entry* found = nullptr;
    int rc = lookup(&entry, buf.data(), buf.size(), &found);
    if (rc == ERANGE && buf.size() < (1u << 24)) {
      buf.resize(buf.size() * 4);
      continue;
    }
    if (rc != 0 || found == nullptr) return false;
    use(entry);
    return true;
  }
}

std::optional<uint32_t> as_number(std::string_view text) {
  uint32_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

}  // namespace

Result<uint32_t> resolve_user(std::string_view text) {
  if (auto n = as_number(text)) return *n;
  const std::string name(text);
  uint32_t uid = 0;
  if (!with_entry<passwd>(
          [&](passwd* e, char* b, size_t n, passwd** out) { return ::getpwnam_r(name.c_str(), e, b, n, out); },
          [&](const passwd& pw) { uid = pw.pw_uid; }))
    return Status(ENOENT, "no user '" + name + "' on this node (a name from the user database, or a number)");
  return uid;
}

Result<uint32_t> resolve_group(std::string_view text) {
  if (auto n = as_number(text)) return *n;
  const std::string name(text);
  uint32_t gid = 0;
  if (!with_entry<group>(
          [&](group* e, char* b, size_t n, group** out) { return ::getgrnam_r(name.c_str(), e, b, n, out); },
          [&](const group& gr) { gid = gr.gr_gid; }))
    return Status(ENOENT, "no group '" + name + "' on this node (a name from the group database, or a number)");
  return gid;
}

std::string user_name(uint32_t uid) {
  std::string name = std::to_string(uid);
  with_entry<passwd>([&](passwd* e, char* b, size_t n, passwd** out) { return ::getpwuid_r(uid, e, b, n, out); },
                     [&](const passwd& pw) { name = pw.pw_name; });
  return name;
}

std::string group_name(uint32_t gid) {
  std::string name = std::to_string(gid);
  with_entry<group>([&](group* e, char* b, size_t n, group** out) { return ::getgrgid_r(gid, e, b, n, out); },
                    [&](const group& gr) { name = gr.gr_name; });
  return name;
}

std::vector<uint32_t> groups_of_user(uint32_t uid) {
  std::string name;
  gid_t primary = 0;
  if (!with_entry<passwd>([&](passwd* e, char* b, size_t n, passwd** out) { return ::getpwuid_r(uid, e, b, n, out); },
                          [&](const passwd& pw) {
                            name = pw.pw_name;
                            primary = pw.pw_gid;
                          }))
    return {};
  std::vector<gid_t> groups(64);
  for (;;) {
    int n = static_cast<int>(groups.size());
    if (::getgrouplist(name.c_str(), primary, groups.data(), &n) >= 0) {
      groups.resize(static_cast<size_t>(n));
      break;
    }
    if (n <= static_cast<int>(groups.size()) || n > (1 << 20)) return {primary};
    groups.resize(static_cast<size_t>(n));
  }
  std::vector<uint32_t> out(groups.begin(), groups.end());
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace dlfs
