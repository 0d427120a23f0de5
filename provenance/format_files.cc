// Format "files": every regular file below the root is one sample, in
// canonical file order. Nothing is stored per sample: sample i is file i.
// With group_by, sample i is the i-th run of files with one key
// (sample_groups.h): 4 bytes per group, its first file.
#include "provenance/dataset_format.h"
#include "provenance/sample_groups.h"

namespace dlfs::provenance {
namespace {

class FileSamples final : public SampleTable {
 public:
  explicit FileSamples(uint64_t count) : count_(count) {}
  uint64_t count() const override { return count_; }
  SampleLocation at(const Manifest& tree, uint64_t i) const override {
    const auto f = static_cast<uint32_t>(i);
    return {f, 0, tree.file_size(f)};
  }
  std::string name(const Manifest& tree, uint64_t i) const override {
    return tree.file_path(static_cast<uint32_t>(i));
  }
  std::string member_name(const Manifest& tree, uint64_t i) const override { return name(tree, i); }
  uint64_t memory_bytes() const override { return sizeof(*this); }

 private:
  uint64_t count_;
};

// Groups of consecutive files with one key. Their bytes are contiguous in the
// byte space (files are back to back), so a group's location is its first
// file from offset 0, for the sum of the members' sizes.
class GroupedFileSamples final : public SampleTable {
 public:
  GroupedFileSamples(std::vector<uint32_t> starts, GroupRule rule) : starts_(std::move(starts)), rule_(rule) {}
  uint64_t count() const override { return starts_.size() - 1; }
  SampleLocation at(const Manifest& tree, uint64_t i) const override {
    const uint32_t first = starts_[i], end = starts_[i + 1];
    const uint64_t bytes = tree.file_data_offset(end - 1) + tree.file_size(end - 1) - tree.file_data_offset(first);
    return {first, 0, bytes};
  }
  // The key: what the group's members share ("n0153/x" of n0153/x.jpg, .cls).
  std::string name(const Manifest& tree, uint64_t i) const override {
    return std::string(group_key(tree.file_path(starts_[i]), rule_));
  }
  std::string member_name(const Manifest& tree, uint64_t i) const override { return name(tree, i); }
  bool grouped() const override { return true; }
  uint32_t member_count(uint64_t i) const override { return starts_[i + 1] - starts_[i]; }
  SampleMember member(const Manifest& tree, uint64_t i, uint32_t j) const override {
    const uint32_t f = starts_[i] + j;
    return {tree.file_path(f), tree.file_data_offset(f) - tree.file_data_offset(starts_[i]), tree.file_size(f), f};
  }
  uint64_t memory_bytes() const override { return sizeof(*this) + starts_.capacity() * sizeof(uint32_t); }

 private:
  std::vector<uint32_t> starts_;  // first file of each group, then file_count()
  GroupRule rule_;
};

class FilesFormat final : public DatasetFormat {
 public:
  std::string_view name() const override { return "files"; }
  std::string_view summary() const override { return "a file a sample"; }
  std::vector<std::string_view> options() const override { return {"group_by"}; }
  Result<std::unique_ptr<SampleTable>> samples(const Manifest& tree, const FormatOptions& o) const override {
    const GroupRule rule = o.group_by;
    if (rule == GroupRule::none) return std::unique_ptr<SampleTable>(std::make_unique<FileSamples>(tree.file_count()));
    return std::unique_ptr<SampleTable>(std::make_unique<GroupedFileSamples>(group_starts(tree, rule), rule));
  }
};

}  // namespace

const DatasetFormat& files_format() {
  static const FilesFormat format;
  return format;
}

}  // namespace dlfs::provenance
