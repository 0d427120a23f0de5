// Every registered view format (fs/views/view_formats.cc: the directory view,
// .index, .tar, .bin) read through Namespace::read_view, without a mount,
// over small generated datasets of each dataset format (files, fixed, lmdb
// with fixed-size and with varying values, tfrecord). Expectations come from the bytes
// the test wrote and from EpochPlan (plan/epoch_plan.h), never from the view
// code: tar and TFRecord streams are parsed here, entry names and index lines rebuilt here.
#include <fcntl.h>
#include <sys/stat.h>

#include <set>
#include <sstream>

#include "fs/views/view_format.h"
#include "views_test_util.h"

namespace dlfs::fs::test {
namespace {

enum class Kind { files, fixed, lmdb_fixed, lmdb_varying, tfrecord };

std::string kind_name(const ::testing::TestParamInfo<Kind>& i) {
  switch (i.param) {
    case Kind::files: return "files";
    case Kind::fixed: return "fixed";
    case Kind::lmdb_fixed: return "lmdb_fixed";
    case Kind::lmdb_varying: return "lmdb_varying";
    case Kind::tfrecord: return "tfrecord";
  }
  return "?";
}

constexpr uint64_t kSeed = 1234;

class FsViewsTest : public ViewsFixture, public ::testing::WithParamInterface<Kind> {
 protected:
  void SetUp() override {
    switch (GetParam()) {
      case Kind::files: g_ = make_files_dataset(tmp_, "data", 27, 20000, 5); break;
      case Kind::fixed: g_ = make_fixed_dataset(tmp_, "data", {7, 0, 11, 13}, 1000, 16, 6); break;
      case Kind::lmdb_fixed: g_ = make_lmdb_dataset(tmp_, "data", 29, 2500, 7); break;  // overflow values
      case Kind::lmdb_varying: g_ = make_lmdb_dataset(tmp_, "data", 33, 0, 8); break;
      case Kind::tfrecord: g_ = make_tfrecord_dataset(tmp_, "data", {9, 0, 12, 8}, 3000, 9); break;
    }
    ASSERT_GT(g_.samples.size(), 20u);
    ids_ = ids_by_member(g_);
  }
  void open_plan(uint64_t seed = kSeed, plan::Remainder remainder = plan::Remainder::pad, uint64_t budget = ~0ull,
                 bool load = false) {
    PlanConfig p;
    p.seed = seed;
    p.remainder = remainder;
    p.world_size = 2;
    open("data", g_, p, budget, load);
  }
  uint64_t n() const { return g_.samples.size(); }
  // The members of a tar as sample ids, failing on names the dataset lacks.
  std::vector<uint64_t> ids_of(const std::vector<TarMember>& tar) const {
    std::vector<uint64_t> out;
    for (const auto& m : tar) {
      auto it = ids_.find(m.name);
      EXPECT_NE(it, ids_.end()) << "member " << m.name << " is no sample of the dataset";
      if (it != ids_.end()) out.push_back(it->second);
    }
    return out;
  }

  Generated g_;
  std::map<std::string, uint64_t> ids_;
};

// This file is the fast check of every view format: a format registered
// without a test here fails.
TEST_P(FsViewsTest, EveryRegisteredFormatIsCoveredAndListedPerRank) {
  const std::set<std::string> tested = {"", ".index", ".tar", ".bin", ".tfrecord", ".tfrecord.idx"};
  open_plan();
  std::vector<std::string> per_rank;
  for (const ViewFormat* f : view_formats()) {
    EXPECT_TRUE(tested.count(std::string(f->extension()))) << "view format '" << f->extension() << "' has no test";
    if (f->applies_to(ds())) per_rank.emplace_back(f->extension());
  }
  // .bin exists exactly for datasets whose samples all have one size.
  EXPECT_EQ(std::count(per_rank.begin(), per_rank.end(), ".bin"), g_.record_size ? 1 : 0);
  // .tfrecord exactly for tfrecord datasets.
  EXPECT_EQ(std::count(per_rank.begin(), per_rank.end(), ".tfrecord"), GetParam() == Kind::tfrecord ? 1 : 0);
  EXPECT_EQ(std::count(per_rank.begin(), per_rank.end(), ".tfrecord.idx"), GetParam() == Kind::tfrecord ? 1 : 0);
  auto w = resolve("ds/epochs/3/2");
  ASSERT_TRUE(w.is_ok()) << w.status().message();
  std::vector<std::string> want;
  for (int r = 0; r < 2; ++r)
    for (const auto& ext : per_rank) want.push_back(std::to_string(r) + ext);
  EXPECT_EQ(list(w->ino), want);
  if (!g_.record_size) {
    EXPECT_EQ(resolve(view_path(0, 2, 0, ".bin")).status().err(), ENOENT);
  }
}

// Each rank's .tar holds its EpochPlan samples in order, with the backend's
// bytes, read in odd-sized requests; resident or not, the bytes are the same.
TEST_P(FsViewsTest, TarStreamsHoldEachRanksPlannedSamplesInOrder) {
  for (bool load : {false, true}) {
    open_plan(kSeed, plan::Remainder::pad, load ? ~0ull : 0, load);
    for (uint64_t e : {0u, 1u}) {
      for (uint32_t w : {1u, 3u}) {
        for (uint32_t r = 0; r < w; ++r) {
          const uint64_t chunk = 777 + 1000 * r + 4093 * e;  // never a multiple of 512
          auto f = open_view(view_path(e, w, r, ".tar"));
          ASSERT_TRUE(f);
          const std::string bytes = read_all(*f, chunk);
          EXPECT_EQ(bytes.size(), resolve(view_path(e, w, r, ".tar"))->size) << "the size stat reports";
          auto tar = parse_tar(bytes);
          const auto want = planned(kSeed, e, n(), w, r);
          ASSERT_EQ(tar.size(), want.size()) << "epoch " << e << " W " << w << " rank " << r;
          for (size_t k = 0; k < want.size(); ++k) {
            const Sample& s = g_.samples[want[k]];
            ASSERT_EQ(tar[k].name, s.member) << "position " << k;
            ASSERT_EQ(tar[k].data, s.bytes) << "member " << s.member;
          }
        }
      }
    }
    const auto& reads = ds().view_counters().reads;
    if (load) {
      EXPECT_GT(reads.memory_bytes.load(), 0u);
      EXPECT_EQ(reads.fetched_bytes.load(), 0u) << "everything resident: nothing read from the backend";
    } else {
      EXPECT_EQ(reads.memory_bytes.load(), 0u) << "nothing resident";
    }
  }
}

// The ranks of W interleave one global order (DistributedSampler): rank r
// has positions r, r+W, ... With pad the first N positions are every sample
// once and the rest wrap to the start; with drop the last N mod W are left
// out and no sample comes twice.
TEST_P(FsViewsTest, RanksPartitionTheEpochUnderPadAndDrop) {
  uint32_t w = 4;
  while (n() % w == 0) ++w;
  for (const std::string rem : {"pad", "drop"}) {
    open_plan(kSeed, *enum_named<plan::Remainder>(rem));
    std::vector<std::vector<uint64_t>> ranks;
    for (uint32_t r = 0; r < w; ++r) ranks.push_back(ids_of(read_tar(2, w, r, 1 << 20)));
    const uint64_t per_rank = rem == "pad" ? (n() + w - 1) / w : n() / w;
    std::vector<uint64_t> global(per_rank * w);
    for (uint32_t r = 0; r < w; ++r) {
      ASSERT_EQ(ranks[r].size(), per_rank) << rem << " rank " << r;
      for (uint64_t k = 0; k < per_rank; ++k) global[k * w + r] = ranks[r][k];
    }
    std::set<uint64_t> distinct(global.begin(), global.begin() + static_cast<long>(std::min<uint64_t>(n(), global.size())));
    if (rem == "pad") {
      EXPECT_EQ(distinct.size(), n()) << "the first N positions are every sample once";
      for (uint64_t i = n(); i < global.size(); ++i) EXPECT_EQ(global[i], global[i - n()]) << "pad wraps around";
    } else {
      EXPECT_EQ(distinct.size(), global.size()) << "drop: no sample twice";
      EXPECT_EQ(global.size(), n() - n() % w);
    }
    // And it is EpochPlan's order.
    for (uint32_t r = 0; r < w; ++r)
      EXPECT_EQ(ranks[r], planned(kSeed, 2, n(), w, r, rem == "pad" ? plan::Remainder::pad : plan::Remainder::drop));
  }
}

// .bin: the rank's records back to back in plan order (fixed-size samples only).
TEST_P(FsViewsTest, BinIsTheRanksRecordsBackToBack) {
  open_plan();
  if (!g_.record_size) {  // samples of varying size: no such view
    EXPECT_EQ(resolve(view_path(1, 1, 0, ".bin")).status().err(), ENOENT);
    return;
  }
  for (uint32_t w : {1u, 2u}) {
    for (uint32_t r = 0; r < w; ++r) {
      std::string want;
      for (uint64_t id : planned(kSeed, 1, n(), w, r)) want += g_.samples[id].bytes;
      auto f = open_view(view_path(1, w, r, ".bin"));
      ASSERT_TRUE(f);
      EXPECT_FALSE(f->fresh_each_lookup) << "a view's bytes are a function of its name";
      EXPECT_EQ(resolve(view_path(1, w, r, ".bin"))->size, want.size());
      EXPECT_EQ(read_all(*f, 999), want) << "W " << w << " rank " << r;
      // A read straddling two records, from the middle of one.
      const uint64_t at = g_.record_size / 2 + g_.record_size;
      EXPECT_EQ(read_range(*f, at, g_.record_size + 3), want.substr(at, g_.record_size + 3));
    }
  }
}

// .tfrecord (tfrecord datasets only): the rank's samples in plan order, each
// framed as a TFRecord record; the test's own parser checks every CRC.
TEST_P(FsViewsTest, TfrecordViewIsTheRanksRecordsAsValidTfrecord) {
  for (bool load : {false, true}) {
    open_plan(kSeed, plan::Remainder::pad, load ? ~0ull : 0, load);
    if (GetParam() != Kind::tfrecord) {
      EXPECT_EQ(resolve(view_path(1, 1, 0, ".tfrecord")).status().err(), ENOENT);
      return;
    }
    for (uint32_t w : {1u, 2u}) {
      for (uint32_t r = 0; r < w; ++r) {
        std::vector<std::string> want;
        uint64_t size = 0;
        for (uint64_t id : planned(kSeed, 1, n(), w, r)) {
          want.push_back(g_.samples[id].bytes);
          size += 16 + want.back().size();
        }
        auto f = open_view(view_path(1, w, r, ".tfrecord"));
        ASSERT_TRUE(f);
        EXPECT_FALSE(f->fresh_each_lookup) << "a view's bytes are a function of its name";
        EXPECT_EQ(resolve(view_path(1, w, r, ".tfrecord"))->size, size);
        const std::string whole = read_all(*f, 1000 + 7 * r);  // requests split headers, data and footers
        EXPECT_EQ(whole.size(), size);
        EXPECT_EQ(dlfs::test::ref_parse(whole), want) << "W " << w << " rank " << r << (load ? " resident" : "");
        // A read from inside one record's header into the next's data.
        EXPECT_EQ(read_range(*f, 5, 40), whole.substr(5, 40));
      }
    }
  }
}

// .tfrecord.idx (tfrecord datasets only): DALI's index of the .tfrecord view,
// "<offset> <size>" per record; each line lands on that record's framing.
TEST_P(FsViewsTest, TfrecordIdxLocatesEveryRecordOfItsView) {
  open_plan();
  if (GetParam() != Kind::tfrecord) {
    EXPECT_EQ(resolve(view_path(1, 1, 0, ".tfrecord.idx")).status().err(), ENOENT);
    return;
  }
  for (uint32_t w : {1u, 3u}) {
    for (uint32_t r = 0; r < w; ++r) {
      auto view = open_view(view_path(1, w, r, ".tfrecord"));
      auto idx = open_view(view_path(1, w, r, ".tfrecord.idx"));
      ASSERT_TRUE(view && idx);
      const std::string records = read_all(*view, 4096), text = read_all(*idx, 13);
      EXPECT_EQ(resolve(view_path(1, w, r, ".tfrecord.idx"))->size, text.size());
      const auto want = planned(kSeed, 1, n(), w, r);
      std::istringstream lines(text);
      uint64_t offset = 0, size = 0, next = 0;
      size_t k = 0;
      for (; lines >> offset >> size; ++k) {
        ASSERT_LT(k, want.size()) << "more index lines than records";
        EXPECT_EQ(offset, next) << "record " << k;
        const std::string& data = g_.samples[want[k]].bytes;
        EXPECT_EQ(size, 16 + data.size()) << "record " << k;
        ASSERT_LE(offset + size, records.size());
        EXPECT_EQ(dlfs::test::ref_parse(records.substr(offset, size)), std::vector<std::string>{data});
        next = offset + size;
      }
      EXPECT_EQ(k, want.size()) << "W " << w << " rank " << r;
      EXPECT_EQ(next, records.size());
    }
  }
}

// The directory view: entry k is "<k zero-padded>-<member name, '/' and '%'
// escaped>", in plan order, and reading it gives the sample's bytes.
TEST_P(FsViewsTest, DirectoryEntriesNameAndReadTheMembersInOrder) {
  open_plan();
  const uint32_t w = 2, r = 1;
  const auto want = planned(kSeed, 1, n(), w, r);
  const size_t width = std::to_string(want.size() - 1).size();
  std::vector<std::string> names;
  for (size_t k = 0; k < want.size(); ++k) {
    std::string pos = std::to_string(k);
    std::string name = std::string(width - pos.size(), '0') + pos + "-";
    for (char c : g_.samples[want[k]].member) name += c == '/' ? "%2F" : c == '%' ? "%25" : std::string(1, c);
    names.push_back(name);
  }
  auto dir = resolve(view_path(1, w, r, ""));
  ASSERT_TRUE(dir.is_ok()) << dir.status().message();
  EXPECT_TRUE(S_ISDIR(dir->mode));
  EXPECT_EQ(ns_->open(dir->ino, O_RDONLY).err(), EISDIR);
  ASSERT_EQ(list(dir->ino), names);
  for (size_t k = 0; k < names.size(); ++k) {
    auto a = ns_->lookup(dir->ino, names[k]);
    ASSERT_TRUE(a.is_ok()) << names[k] << ": " << a.status().message();
    const std::string& bytes = g_.samples[want[k]].bytes;
    EXPECT_EQ(a->size, bytes.size()) << names[k];
    ASSERT_TRUE(ns_->open(a->ino, O_RDONLY).is_ok());
    EXPECT_EQ(read_all(*a, 333), bytes) << names[k];
  }
  // Names that are not exactly an entry's: wrong member, no padding, past the end.
  EXPECT_EQ(ns_->lookup(dir->ino, std::string(width, '0') + "-nope").status().err(), ENOENT);
  ASSERT_GE(width, 2u);
  EXPECT_EQ(ns_->lookup(dir->ino, "1-" + names[1].substr(width + 1)).status().err(), ENOENT);
  EXPECT_EQ(ns_->lookup(dir->ino, std::to_string(want.size()) + "-x").status().err(), ENOENT);
}

// .index: a header naming the plan, then per position k the sample id, the
// offset of its data in the .tar, its length and member name.
TEST_P(FsViewsTest, IndexListsTheTarMembersAndTheirOffsets) {
  open_plan();
  const uint32_t w = 2, r = 0;
  const auto want = planned(kSeed, 0, n(), w, r);
  const auto tar = read_tar(0, w, r, 1 << 16);
  ASSERT_EQ(tar.size(), want.size());
  auto f = open_view(view_path(0, w, r, ".index"));
  ASSERT_TRUE(f);
  EXPECT_TRUE(f->lookup_only) << "its size costs the whole text: listings do not make it";
  const std::string whole = read_all(*f, 100);
  EXPECT_EQ(f->size, whole.size()) << "a lookup gives the size";
  std::istringstream text(whole);
  std::string header;
  std::getline(text, header);
  for (const std::string field : {"# dlfs view dataset=ds ", " epoch=0 ", " world_size=2 ", " rank=0 ",
                                  " remainder=pad ", " order=ordered "})
    EXPECT_NE(header.find(field), std::string::npos) << "'" << field << "' in: " << header;
  EXPECT_NE(header.find(" samples=" + std::to_string(want.size()) + " "), std::string::npos) << header;
  EXPECT_NE(header.find(" seed=" + std::to_string(kSeed) + " "), std::string::npos) << header;
  std::string line;
  size_t k = 0;
  for (; std::getline(text, line); ++k) {
    ASSERT_LT(k, want.size()) << "extra line: " << line;
    const Sample& s = g_.samples[want[k]];
    EXPECT_EQ(line, std::to_string(k) + "\t" + std::to_string(want[k]) + "\t" + std::to_string(tar[k].data_offset) +
                        "\t" + std::to_string(s.bytes.size()) + "\t" + s.member);
  }
  EXPECT_EQ(k, want.size());
  // The view's xattrs describe the same plan.
  auto a = resolve(view_path(0, w, r, ".tar"));
  ASSERT_TRUE(a.is_ok());
  EXPECT_EQ(*ns_->getxattr(a->ino, "user.dlfs.samples"), std::to_string(want.size()));
  EXPECT_EQ(*ns_->getxattr(a->ino, "user.dlfs.seed"), std::to_string(kSeed));
  EXPECT_EQ(*ns_->getxattr(a->ino, "user.dlfs.rank"), "0");
  EXPECT_EQ(ns_->getxattr(a->ino, "user.dlfs.nope").status().err(), ENODATA);
}

// Orders are a function of (seed, epoch): another epoch reorders, the same
// seed in a new daemon repeats byte for byte, another seed reorders.
TEST_P(FsViewsTest, EpochsReorderAndTheSameSeedRepeats) {
  open_plan(kSeed);
  auto read_whole = [&](uint64_t e) {
    auto f = open_view(view_path(e, 1, 0, ".tar"));
    return f ? read_all(*f, 1 << 20) : std::string();
  };
  const std::string e0 = read_whole(0), e1 = read_whole(1);
  EXPECT_NE(ids_of(parse_tar(e0)), ids_of(parse_tar(e1)));
  open_plan(kSeed);  // a new Dataset and Namespace: nothing shared but the seed
  EXPECT_EQ(read_whole(0), e0);
  open_plan(kSeed + 1);
  EXPECT_NE(ids_of(parse_tar(read_whole(0))), ids_of(parse_tar(e0)));
}

INSTANTIATE_TEST_SUITE_P(Formats, FsViewsTest,
                         ::testing::Values(Kind::files, Kind::fixed, Kind::lmdb_fixed, Kind::lmdb_varying,
                                           Kind::tfrecord),
                         kind_name);

}  // namespace
}  // namespace dlfs::fs::test
