// Format "tar": WebDataset shards. Every regular file of the tree whose name
// ends in ".tar" is a shard (other files are ignored: sidecars, READMEs);
// a sample is a run of consecutive members of one shard with one key
// (group_by: "first-dot", the WebDataset key, or "last-dot"), found by one
// scan of the shards' headers at load (tar_shard_scan.h).
//
// A group's members are one contiguous range of its shard, from the first
// member's first header to the end of the last member's data: that range is
// the sample's location, so reads, rounds and striping move it as they move
// any sample, and the views take each member's data at its offset inside it
// (the shard's own headers in between are never served; the views write
// their own). Per sample 16 bytes, per member 24 bytes plus its name.
#include <fcntl.h>

#include <cerrno>
#include <cstdint>
#include <string>
#include <vector>

#include "common/unique_fd.h"
#include "provenance/dataset_format.h"
#include "provenance/sample_groups.h"
#include "provenance/tar_shard_scan.h"

namespace dlfs::provenance {
namespace {

struct TarGroup {
  uint64_t offset = 0;        // first header of the first member, in the shard
  uint32_t shard = 0;         // file id
  uint32_t first_member = 0;  // into the member arrays
};

class TarSamples final : public SampleTable {
 public:
  explicit TarSamples(GroupRule rule) : rule_(rule) { name_end_.push_back(0); }

  // Adds a member of shard `file`: a new sample unless it continues the last one.
  void add(uint32_t file, TarShardMember&& m) {
    const bool same = !groups_.empty() && groups_.back().shard == file && !data_.empty() &&
                      group_key(member_name(data_.size() - 1), rule_) == group_key(m.name, rule_);
    if (!same) groups_.push_back({m.header_offset, file, static_cast<uint32_t>(data_.size())});
    data_.push_back(m.data_offset);
    size_.push_back(m.size);
    names_ += m.name;
    name_end_.push_back(names_.size());
  }
  void seal() {
    groups_.push_back({0, 0, static_cast<uint32_t>(data_.size())});  // the end of the last group
    groups_.shrink_to_fit();
    data_.shrink_to_fit();
    size_.shrink_to_fit();
    names_.shrink_to_fit();
    name_end_.shrink_to_fit();
  }
  uint64_t member_total() const { return data_.size(); }

  uint64_t count() const override { return groups_.size() - 1; }
  SampleLocation at(const Manifest&, uint64_t i) const override {
    const TarGroup& g = groups_[i];
    const uint32_t last = groups_[i + 1].first_member - 1;
    return {g.shard, g.offset, data_[last] + size_[last] - g.offset};
  }
  // The key ("n0153/x" of n0153/x.jpg and n0153/x.cls), as files' groups.
  std::string name(const Manifest&, uint64_t i) const override {
    return std::string(group_key(member_name(groups_[i].first_member), rule_));
  }
  std::string member_name(const Manifest& tree, uint64_t i) const override { return name(tree, i); }
  bool grouped() const override { return true; }
  uint32_t member_count(uint64_t i) const override { return groups_[i + 1].first_member - groups_[i].first_member; }
  SampleMember member(const Manifest&, uint64_t i, uint32_t j) const override {
    const uint64_t m = groups_[i].first_member + j;
    return {std::string(member_name(m)), data_[m] - groups_[i].offset, size_[m], groups_[i].shard};
  }
  uint64_t memory_bytes() const override {
    return sizeof(*this) + groups_.capacity() * sizeof(TarGroup) +
           (data_.capacity() + size_.capacity() + name_end_.capacity()) * sizeof(uint64_t) + names_.capacity();
  }

 private:
  std::string_view member_name(uint64_t m) const {
    return std::string_view(names_).substr(name_end_[m], name_end_[m + 1] - name_end_[m]);
  }

  GroupRule rule_;
  std::vector<TarGroup> groups_;  // one per sample, then an end marker
  std::vector<uint64_t> data_;    // per member: data offset in its shard
  std::vector<uint64_t> size_;    // per member: bytes
  std::string names_;             // member names back to back
  std::vector<uint64_t> name_end_;  // names_[name_end_[m], name_end_[m+1]) is member m's
};

class TarFormat final : public DatasetFormat {
 public:
  std::string_view name() const override { return "tar"; }
  std::string_view summary() const override {
    return "WebDataset tar shards (*.tar): a sample is the members with one key";
  }
  std::vector<std::string_view> options() const override { return {"group_by"}; }
  // Shards as WebDataset reads them: the members with one key up to the first
  // dot of the basename are a sample (a member a sample would split every
  // image from its label).
  void apply_defaults(FormatOptions& o) const override {
    if (o.group_by == GroupRule::none) o.group_by = GroupRule::first_dot;
  }
  Status check_options(const FormatOptions& o) const override {
    // A silent member-a-sample default would split every image from its label.
    if (o.group_by == GroupRule::none)
      return Status(EINVAL,
                    "format 'tar' needs group_by = \"first-dot\" (the WebDataset key) or \"last-dot\", not \"none\"");
    return Status::ok();
  }
  Result<std::unique_ptr<SampleTable>> samples(const Manifest& tree, const FormatOptions& o) const override {
    DLFS_RETURN_IF_ERROR(check_options(o));
    auto table = std::make_unique<TarSamples>(o.group_by);
    uint32_t shards = 0;
    for (uint32_t f = 0; f < tree.file_count(); ++f) {
      if (!is_tar_shard_name(tree.file_name(f))) continue;
      ++shards;
      const std::string rel = tree.file_path(f), path = tree.root() + "/" + rel;
      UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
      if (!fd.valid()) return Status::from_errno(errno, "tar shard '" + rel + "'");
      DLFS_RETURN_IF_ERROR(scan_tar_shard(fd.get(), tree.file_size(f), rel, [&](TarShardMember&& m) {
                             table->add(f, std::move(m));
                           }).status());
    }
    if (shards == 0) return Status(ENOENT, "dataset root '" + tree.root() + "' holds no '.tar' shard");
    if (table->member_total() > UINT32_MAX) return Status(EFBIG, "more than 2^32 tar members");
    table->seal();
    return std::unique_ptr<SampleTable>(std::move(table));
  }
};

}  // namespace

const DatasetFormat& tar_format() {
  static const TarFormat format;
  return format;
}

}  // namespace dlfs::provenance
