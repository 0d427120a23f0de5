#include "fs/views/resume_order.h"

#include "common/decimal.h"

namespace dlfs::fs {

uint64_t per_rank(uint64_t samples, uint64_t world, plan::Remainder rem) {
  if (world == 0) return 0;
  return rem == plan::Remainder::drop ? samples / world : (samples + world - 1) / world;
}

Result<std::vector<uint64_t>> parse_consumed(std::string_view text, uint32_t world) {
  if (text.empty()) return Status(EINVAL, "no consumed counts");
  std::vector<uint64_t> counts;
  if (text.find_first_of(",*") == std::string_view::npos) {
    const auto c = parse_canonical_decimal(text);
    if (!c) return Status(EINVAL, "'" + std::string(text) + "' is not a count");
    counts.assign(world, *c);
    return counts;
  }
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string_view item = text.substr(at, comma - at);
    const size_t star = item.find('*');
    const auto c = parse_canonical_decimal(item.substr(0, star));
    const auto k = star == std::string_view::npos ? std::optional<uint64_t>(1) : parse_canonical_decimal(item.substr(star + 1));
    if (!c || !k || *k == 0) return Status(EINVAL, "'" + std::string(item) + "' is not a count (or 'count*ranks')");
    if (*k > world || counts.size() + *k > world)
      return Status(EINVAL, "more than " + std::to_string(world) + " counts for world size " + std::to_string(world));
    counts.insert(counts.end(), *k, *c);
    at = comma + 1;
  }
  if (counts.size() != world)
    return Status(EINVAL, std::to_string(counts.size()) + " counts for world size " + std::to_string(world) +
                              " (one count for every rank, or one per rank)");
  return counts;
}

std::string consumed_name(std::span<const uint64_t> counts) {
  std::string out;
  bool all_equal = true;
  for (uint64_t c : counts) all_equal = all_equal && c == counts[0];
  if (!counts.empty() && all_equal) return std::to_string(counts[0]);
  for (size_t i = 0; i < counts.size();) {
    size_t j = i;
    while (j < counts.size() && counts[j] == counts[i]) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(counts[i]);
    if (j - i > 1) out += "*" + std::to_string(j - i);
    i = j;
  }
  return out;
}

Status check_consumed(uint64_t samples, uint32_t world, std::span<const uint64_t> counts, plan::Remainder rem) {
  if (world == 0) return Status(EINVAL, "world size 0");
  if (counts.size() != world)
    return Status(EINVAL, std::to_string(counts.size()) + " counts for world size " + std::to_string(world));
  const uint64_t limit = per_rank(samples, world, rem);
  for (uint32_t r = 0; r < world; ++r)
    if (counts[r] > limit)
      return Status(EINVAL, "rank " + std::to_string(r) + " of " + std::to_string(world) + " consumed " +
                                std::to_string(counts[r]) + " samples, but its view holds " + std::to_string(limit));
  return Status::ok();
}

Result<std::shared_ptr<const ResumeOrder>> remaining_positions(uint64_t samples, uint32_t world,
                                                               std::span<const uint64_t> counts,
                                                               plan::Remainder rem) {
  DLFS_RETURN_IF_ERROR(check_consumed(samples, world, counts, rem));
  // Marked by position mod N: the order is a permutation, so a position and
  // its wrap name the same sample, and a sample consumed twice (pad) is
  // still left out once.
  std::vector<bool> consumed(samples, false);
  uint64_t marked = 0;
  for (uint32_t r = 0; r < world; ++r)
    for (uint64_t k = 0; k < counts[r]; ++k) {
      const uint64_t p = (r + k * world) % samples;
      marked += !consumed[p];
      consumed[p] = true;
    }
  auto out = std::make_shared<ResumeOrder>();
  out->positions.reserve(samples - marked);
  for (uint64_t p = 0; p < samples; ++p)
    if (!consumed[p]) out->positions.push_back(p);
  return std::shared_ptr<const ResumeOrder>(std::move(out));
}

}  // namespace dlfs::fs
