// The system's users and groups (through NSS: /etc/passwd and /etc/group, or
// LDAP and the like): names to numbers and back, and who is in which group.
// Used to say who may read a dataset's views (fs/dataset/audience.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace dlfs {

// "alice" or "1000" -> 1000. A number needs no entry in the database (a
// uid that only exists on the backend is fine). ENOENT names the text.
Result<uint32_t> resolve_user(std::string_view name_or_number);
Result<uint32_t> resolve_group(std::string_view name_or_number);

// "alice", or the number as text when the database does not know it.
std::string user_name(uint32_t uid);
std::string group_name(uint32_t gid);

// The groups `uid` is in by the database: its primary group and every
// supplementary one, sorted. Empty for a uid the database does not know.
std::vector<uint32_t> groups_of_user(uint32_t uid);

}  // namespace dlfs
