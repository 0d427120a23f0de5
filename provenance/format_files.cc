// Format "files": every regular file below the root is one sample, in
// canonical file order. Nothing is stored per sample: sample i is file i.
#include "provenance/dataset_format.h"

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

class FilesFormat final : public DatasetFormat {
 public:
  std::string_view name() const override { return "files"; }
  std::string_view summary() const override { return "a file a sample"; }
  Status check_options(const FormatOptions& o) const override {
    if (o.record_size != 0 || o.header_bytes != 0)
      return Status(EINVAL, "record_size and header_bytes apply to format 'fixed' only");
    return Status::ok();
  }
  Result<std::unique_ptr<SampleTable>> samples(const Manifest& tree, const FormatOptions&) const override {
    return std::unique_ptr<SampleTable>(std::make_unique<FileSamples>(tree.file_count()));
  }
};

}  // namespace

const DatasetFormat& files_format() {
  static const FilesFormat format;
  return format;
}

}  // namespace dlfs::provenance
