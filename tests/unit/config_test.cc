#include <gtest/gtest.h>

#include "fs/config/config.h"
#include "fs/config/config_file.h"

namespace dlfs::fs {
namespace {

TEST(Config, ParsesAFullConfig) {
  auto c = parse_config(R"(
[daemon]
mountpoint = "/mnt/dlfs"
log_level = "debug"
fuse_threads = 8
allow_other = false
[cache]
memory_budget = "4GiB"
extent_size = "4MiB"
loader_threads = 2
read_size = 1048576
[[dataset]]
name = "imagenet"
backend = "/data/imagenet"
[[dataset]]
name = "cifar"
backend = "/data/cifar"
format = "fixed"
record_size = 3073
)", "test");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->mountpoint, "/mnt/dlfs");
  EXPECT_EQ(c->fuse_threads, 8u);
  EXPECT_FALSE(c->allow_other);
  EXPECT_EQ(c->memory_budget, "4GiB");
  EXPECT_EQ(c->extent_size, 4u << 20);
  EXPECT_EQ(c->read_size, 1u << 20);
  ASSERT_EQ(c->datasets.size(), 2u);
  EXPECT_EQ(c->datasets[1].format.format, "fixed");
  EXPECT_EQ(c->datasets[1].format.record_size, 3073u);
  EXPECT_TRUE(validate_config(*c).is_ok());
}

TEST(Config, UnknownKeyIsNamed) {
  auto c = parse_config("[cache]\nmemroy_budget = \"1GiB\"\n", "job.toml");
  ASSERT_FALSE(c.is_ok());
  EXPECT_NE(c.status().message().find("unknown key 'cache.memroy_budget'"), std::string::npos) << c.status().message();
  EXPECT_NE(c.status().message().find("memory_budget"), std::string::npos);
  auto top = parse_config("mountpiont = \"/x\"\n", "job.toml");
  ASSERT_FALSE(top.is_ok());
  EXPECT_NE(top.status().message().find("'mountpiont'"), std::string::npos);
}

TEST(Config, BadValuesAreNamed) {
  auto t = parse_config("[daemon]\nfuse_threads = \"many\"\n", "x");
  ASSERT_FALSE(t.is_ok());
  EXPECT_NE(t.status().message().find("daemon.fuse_threads"), std::string::npos);
  auto s = parse_config("[cache]\nextent_size = \"8 parsecs\"\n", "x");
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.status().message().find("cache.extent_size"), std::string::npos) << s.status().message();
  auto f = parse_config("[[dataset]]\nname=\"a\"\nbackend=\"/b\"\nformat=\"hdf5\"\n", "x");
  ASSERT_FALSE(f.is_ok());
  EXPECT_NE(f.status().message().find("hdf5"), std::string::npos) << f.status().message();
  auto syntax = parse_config("[daemon\n", "x");
  ASSERT_FALSE(syntax.is_ok());
  EXPECT_NE(syntax.status().message().find("line 1"), std::string::npos) << syntax.status().message();
}

TEST(Config, ValidationCatchesInconsistencies) {
  DaemonConfig c;
  EXPECT_NE(validate_config(c).message().find("mountpoint"), std::string::npos);
  c.mountpoint = "/mnt";
  EXPECT_NE(validate_config(c).message().find("no dataset"), std::string::npos);
  c.datasets.push_back({"a", "/x", {}, {}});
  c.datasets.push_back({"a", "/y", {}, {}});
  EXPECT_NE(validate_config(c).message().find("used twice"), std::string::npos);
  c.datasets[1].name = "../evil";
  EXPECT_NE(validate_config(c).message().find("not valid"), std::string::npos);
  c.datasets[1].name = "b";
  c.datasets[1].format.format = "fixed";
  EXPECT_NE(validate_config(c).message().find("record_size"), std::string::npos);
  c.datasets[1].format.record_size = 10;
  EXPECT_TRUE(validate_config(c).is_ok());
  // A silence bound no longer than a heartbeat would mark every peer down between pongs.
  c.heartbeat_ms = 2000;
  EXPECT_NE(validate_config(c).message().find("down_after_ms (2000) must be longer than heartbeat_ms (2000)"),
            std::string::npos) << validate_config(c).message();
  c.down_after_ms = 6000;
  EXPECT_TRUE(validate_config(c).is_ok());
  // Who may read the views: a typo must not leave them open or closed.
  c.datasets[1].view_group = "no-such-group-dlfs";
  EXPECT_NE(validate_config(c).message().find("dataset 'b': view_group: no group 'no-such-group-dlfs'"),
            std::string::npos)
      << validate_config(c).message();
  c.datasets[1].view_group = "60010";
  c.datasets[1].view_owner = "no-such-user-dlfs";
  EXPECT_NE(validate_config(c).message().find("view_owner: no user 'no-such-user-dlfs'"), std::string::npos);
  c.datasets[1].view_owner = "root";
  c.datasets[1].view_mode = "0x44";
  EXPECT_NE(validate_config(c).message().find("view_mode '0x44' is not a mode"), std::string::npos);
  c.datasets[1].view_mode = "0440";
  EXPECT_TRUE(validate_config(c).is_ok()) << validate_config(c).message();
}

TEST(Config, MemoryBudgetResolves) {
  EXPECT_EQ(*resolve_memory_budget("50%", 1000), 500u);
  EXPECT_EQ(*resolve_memory_budget("2GiB", 1000), 2ull << 30);
  EXPECT_FALSE(resolve_memory_budget("150%", 1000).is_ok());
  EXPECT_FALSE(resolve_memory_budget("abc%", 1000).is_ok());
  EXPECT_FALSE(resolve_memory_budget("lots", 1000).is_ok());
}

// stod reads "nan" and "inf": neither is a share of memory (NaN used to pass
// the range check and be converted to an integer, undefined behaviour).
TEST(Config, MemoryBudgetRefusesNanAndInfiniteShares) {
  for (const char* text : {"nan%", "NAN%", "-nan%", "inf%", "-inf%", "0%", "-0%", "1e999%"}) {
    auto r = resolve_memory_budget(text, 1000);
    ASSERT_FALSE(r.is_ok()) << text << " resolved to " << *r;
    EXPECT_EQ(r.status().err(), EINVAL) << text;
    EXPECT_NE(r.status().message().find(text), std::string::npos) << r.status().message();
  }
  EXPECT_EQ(*resolve_memory_budget("1e-300%", 1000), 0u);
  EXPECT_EQ(*resolve_memory_budget("100%", 1000), 1000u);
}

// metrics_address: loopback unless an address is given; bad text names the key.
TEST(Config, MetricsAddress) {
  struct Case {
    std::string text, host;
    uint16_t port;
    bool ipv6;
  };
  for (const Case& c : std::vector<Case>{{"9567", "127.0.0.1", 9567, false},
                                         {":9567", "127.0.0.1", 9567, false},
                                         {"0.0.0.0:80", "0.0.0.0", 80, false},
                                         {"10.1.2.3:65535", "10.1.2.3", 65535, false},
                                         {"localhost:1", "localhost", 1, false},
                                         {"node-7.cluster:9567", "node-7.cluster", 9567, false},
                                         {"[::1]:9567", "::1", 9567, true},
                                         {"[::]:9567", "::", 9567, true}}) {
    auto a = parse_metrics_address(c.text);
    ASSERT_TRUE(a.is_ok()) << c.text << ": " << a.status().message();
    EXPECT_EQ(a->host, c.host) << c.text;
    EXPECT_EQ(a->port, c.port) << c.text;
    EXPECT_EQ(a->ipv6, c.ipv6) << c.text;
  }
  EXPECT_EQ(parse_metrics_address("9567")->text(), "127.0.0.1:9567");
  EXPECT_EQ(parse_metrics_address("[::1]:80")->text(), "[::1]:80");
  for (const std::string bad : {"", ":", "0", "65536", "09567", "host:", "host:x", "::1:9567", "[::1]9567", "[::1]:",
                                "[nothost]:80", "bad_name:80", "-x:80", "1.2.3.4:80/metrics", "http://a:80"}) {
    auto a = parse_metrics_address(bad);
    ASSERT_FALSE(a.is_ok()) << "'" << bad << "' was taken";
    EXPECT_NE(a.status().message().find("metrics_address '" + bad + "'"), std::string::npos) << a.status().message();
  }
  DaemonConfig c;
  c.mountpoint = "/mnt";
  c.datasets.push_back({"a", "/b", {}, {}});
  EXPECT_TRUE(validate_config(c).is_ok());  // off by default
  c.metrics_address = "off";
  EXPECT_TRUE(validate_config(c).is_ok());
  c.metrics_address = "127.0.0.1:9567";
  EXPECT_TRUE(validate_config(c).is_ok());
  c.metrics_address = "127.0.0.1:port";
  EXPECT_NE(validate_config(c).message().find("metrics_address '127.0.0.1:port' is not valid"), std::string::npos)
      << validate_config(c).message();
}

}  // namespace
}  // namespace dlfs::fs
