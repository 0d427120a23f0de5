// Format "fixed": every regular file is a sequence of fixed-length records
// after an optional header (CIFAR-10 binary style); each record is a sample,
// in file order then record order. A file whose size minus header is not a
// whole number of records is an error naming the file and its size.
#include <algorithm>
#include <cstdio>

#include "provenance/dataset_format.h"

namespace dlfs::provenance {
namespace {

class FixedSamples final : public SampleTable {
 public:
  FixedSamples(const FormatOptions& o, std::vector<uint64_t> first)
      : record_(o.record_size), header_(o.header_bytes), first_(std::move(first)) {}
  uint64_t count() const override { return first_.back(); }
  SampleLocation at(const Manifest&, uint64_t i) const override {
    const uint32_t f = file_of(i);
    return {f, header_ + (i - first_[f]) * record_, record_};
  }
  std::string name(const Manifest& tree, uint64_t i) const override {
    const uint32_t f = file_of(i);
    char idx[32];
    std::snprintf(idx, sizeof idx, "#%06llu", static_cast<unsigned long long>(i - first_[f]));
    return tree.file_path(f) + idx;
  }
  std::string member_name(const Manifest& tree, uint64_t i) const override {
    const uint32_t f = file_of(i);
    char rec[32];
    std::snprintf(rec, sizeof rec, "/%08llu.bin", static_cast<unsigned long long>(i - first_[f]));
    return tree.file_path(f) + rec;
  }
  uint64_t fixed_size() const override { return record_; }
  uint64_t memory_bytes() const override { return sizeof(*this) + first_.capacity() * sizeof(uint64_t); }

 private:
  uint32_t file_of(uint64_t i) const {
    auto it = std::upper_bound(first_.begin(), first_.end(), i);
    return static_cast<uint32_t>(it - first_.begin()) - 1;
  }
  uint64_t record_, header_;
  std::vector<uint64_t> first_;  // first sample of each file, plus the count
};

class FixedFormat final : public DatasetFormat {
 public:
  std::string_view name() const override { return "fixed"; }
  std::string_view summary() const override { return "fixed-length records after an optional header per file"; }
  std::vector<std::string_view> options() const override { return {"record_size", "header_bytes"}; }
  Status check_options(const FormatOptions& o) const override {
    if (o.record_size == 0) return Status(EINVAL, "format 'fixed' needs a record size (record_size > 0)");
    return Status::ok();
  }
  Result<std::unique_ptr<SampleTable>> samples(const Manifest& tree, const FormatOptions& o) const override {
    DLFS_RETURN_IF_ERROR(check_options(o));
    std::vector<uint64_t> first;
    first.reserve(tree.file_count() + 1);
    first.push_back(0);
    for (uint32_t f = 0; f < tree.file_count(); ++f) {
      const uint64_t size = tree.file_size(f);
      if (size < o.header_bytes || (size - o.header_bytes) % o.record_size != 0)
        return Status(EINVAL, "file '" + tree.file_path(f) + "' has " + std::to_string(size) + " bytes, not " +
                                  std::to_string(o.header_bytes) + " header + a whole number of " +
                                  std::to_string(o.record_size) + "-byte records");
      first.push_back(first.back() + (size - o.header_bytes) / o.record_size);
    }
    return std::unique_ptr<SampleTable>(std::make_unique<FixedSamples>(o, std::move(first)));
  }
};

}  // namespace

const DatasetFormat& fixed_format() {
  static const FixedFormat format;
  return format;
}

}  // namespace dlfs::provenance
