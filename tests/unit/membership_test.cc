// Membership: peer addresses, Slurm hostlist expansion (checked against what
// `scontrol show hostnames` prints), and the choice of peers and rank from
// the config, Slurm's environment, or neither. The environment is injected,
// so nothing here depends on the machine the test runs on.
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "transport/membership.h"

namespace dlfs::transport {
namespace {

using Names = std::vector<std::string>;

Names expand(std::string_view list) {
  auto r = expand_hostlist(list);
  EXPECT_TRUE(r.is_ok()) << list << ": " << r.status().message();
  return r.is_ok() ? *r : Names{};
}

// The error of a list that must fail: EINVAL or E2BIG, and a message that quotes the list.
std::string expand_error(std::string_view list) {
  auto r = expand_hostlist(list);
  EXPECT_FALSE(r.is_ok()) << list << " should fail";
  if (r.is_ok()) return "";
  EXPECT_TRUE(r.status().err() == EINVAL || r.status().err() == E2BIG) << r.status().message();
  if (!list.empty()) {
    EXPECT_NE(r.status().message().find(std::string(list)), std::string::npos) << r.status().message();
  }
  return r.status().message();
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// ---- hostlists -------------------------------------------------------------

TEST(Hostlist, PlainNames) {
  EXPECT_EQ(expand("gpu5"), Names{"gpu5"});
  EXPECT_EQ(expand("a,b,c"), (Names{"a", "b", "c"}));
  EXPECT_EQ(expand("n1.cluster.org"), Names{"n1.cluster.org"});
  EXPECT_EQ(expand("b,a,a"), (Names{"b", "a", "a"}));  // order and duplicates kept, as Slurm does
}

TEST(Hostlist, TheBriefsExample) {
  EXPECT_EQ(expand("node[01-03,07],gpu5,rack[1-2]-n[1-2]"),
            (Names{"node01", "node02", "node03", "node07", "gpu5", "rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"}));
}

TEST(Hostlist, ZeroPaddingOfTheFirstBound) {
  EXPECT_EQ(expand("n[008-011]"), (Names{"n008", "n009", "n010", "n011"}));
  EXPECT_EQ(expand("n[08-9]"), (Names{"n08", "n09"}));
  EXPECT_EQ(expand("n[8-11]"), (Names{"n8", "n9", "n10", "n11"}));     // no padding: widths grow
  EXPECT_EQ(expand("n[0-2]"), (Names{"n0", "n1", "n2"}));              // a lone 0 is not padding
  EXPECT_EQ(expand("n[099-101]"), (Names{"n099", "n100", "n101"}));    // wider than the pad: as is
}

TEST(Hostlist, SingleElementsAndLists) {
  EXPECT_EQ(expand("n[5]"), Names{"n5"});
  EXPECT_EQ(expand("n[05]"), Names{"n05"});
  EXPECT_EQ(expand("n[3-3]"), Names{"n3"});
  EXPECT_EQ(expand("n[1,3,5-6]"), (Names{"n1", "n3", "n5", "n6"}));
  EXPECT_EQ(expand("[1-2]"), (Names{"1", "2"}));
}

TEST(Hostlist, CommasInsideBracketsDoNotSplit) {
  EXPECT_EQ(expand("a[1,2],b[3,4]"), (Names{"a1", "a2", "b3", "b4"}));
}

TEST(Hostlist, CartesianProductLeftGroupOutermost) {
  EXPECT_EQ(expand("r[1-2]n[1-3]"), (Names{"r1n1", "r1n2", "r1n3", "r2n1", "r2n2", "r2n3"}));
  EXPECT_EQ(expand("a[1,3]b[7]c[0-1]x"), (Names{"a1b7c0x", "a1b7c1x", "a3b7c0x", "a3b7c1x"}));
  EXPECT_EQ(expand("n[1-2]-ib"), (Names{"n1-ib", "n2-ib"}));  // text after the group
}

TEST(Hostlist, SeparatorsAsSlurm) {
  // Slurm splits at ',', ' ' and tab outside brackets, and a run of them makes no empty name.
  EXPECT_EQ(expand("a b\tc"), (Names{"a", "b", "c"}));
  EXPECT_EQ(expand("a,,b,"), (Names{"a", "b"}));
  EXPECT_EQ(expand(" n[1-2] "), (Names{"n1", "n2"}));
}

TEST(Hostlist, LargestAllowedRange) {
  auto r = expand_hostlist("n[1-65536]");
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  ASSERT_EQ(r->size(), 65536u);
  EXPECT_EQ(r->front(), "n1");
  EXPECT_EQ(r->back(), "n65536");
}

TEST(Hostlist, Errors) {
  EXPECT_TRUE(contains(expand_error("n[1-3"), "unbalanced '['"));
  EXPECT_TRUE(contains(expand_error("n1-3]"), "unbalanced ']'"));
  EXPECT_TRUE(contains(expand_error("n]1[2"), "unbalanced"));
  EXPECT_TRUE(contains(expand_error("n[5-3]"), "'5-3' is reversed"));
  EXPECT_TRUE(contains(expand_error("n[a-c]"), "'a-c' is not a number"));
  EXPECT_TRUE(contains(expand_error("n[1-x]"), "'1-x'"));
  EXPECT_TRUE(contains(expand_error("n[-3]"), "'-3'"));
  EXPECT_TRUE(contains(expand_error("n[1--3]"), "'1--3'"));
  EXPECT_TRUE(contains(expand_error("n[1,]"), "not a number"));
  EXPECT_TRUE(contains(expand_error("n[]"), "empty '[]'"));
  EXPECT_TRUE(contains(expand_error("n[1-65537]"), "too many hosts"));
  EXPECT_TRUE(contains(expand_error("a[1-300]b[1-300]"), "too many hosts"));  // 90000 by product
  EXPECT_TRUE(contains(expand_error("a[1-40000],b[1-40000]"), "too many hosts"));  // 80000 in total
  EXPECT_TRUE(contains(expand_error("n[99999999999999999999]"), "not a number"));  // overflows 64 bits
  // The top of the 64-bit range must neither wrap around nor loop forever.
  EXPECT_EQ(expand("n[18446744073709551614-18446744073709551615]"),
            (Names{"n18446744073709551614", "n18446744073709551615"}));
  EXPECT_TRUE(contains(expand_error(""), "no host"));
  EXPECT_TRUE(contains(expand_error(" , "), "no host"));
}

// ---- peer addresses --------------------------------------------------------

PeerAddress peer(std::string_view text, uint16_t def = 7710) {
  auto r = parse_peer(text, def);
  EXPECT_TRUE(r.is_ok()) << text << ": " << r.status().message();
  return r.is_ok() ? *r : PeerAddress{};
}

std::string peer_error(std::string_view text) {
  auto r = parse_peer(text, 7710);
  EXPECT_FALSE(r.is_ok()) << text << " should fail";
  if (r.is_ok()) return "";
  EXPECT_EQ(r.status().err(), EINVAL);
  EXPECT_TRUE(contains(r.status().message(), "peer '" + std::string(text) + "'")) << r.status().message();
  return r.status().message();
}

TEST(PeerAddress, HostAndPort) {
  auto p = peer("10.0.0.1:7711");
  EXPECT_EQ(p.host, "10.0.0.1");
  EXPECT_EQ(p.port, 7711);
  EXPECT_EQ(p.to_string(), "10.0.0.1:7711");
  EXPECT_EQ(peer("node01.cluster:1").port, 1);
  EXPECT_EQ(peer("n:65535").port, 65535);
}

TEST(PeerAddress, DefaultPort) {
  auto p = peer("node07", 9000);
  EXPECT_EQ(p.host, "node07");
  EXPECT_EQ(p.port, 9000);
  EXPECT_EQ(p.to_string(), "node07:9000");
}

TEST(PeerAddress, IPv6InBrackets) {
  auto p = peer("[::1]:7712");
  EXPECT_EQ(p.host, "::1");
  EXPECT_EQ(p.port, 7712);
  EXPECT_EQ(p.to_string(), "[::1]:7712");
  auto q = peer("[fe80::1%eth0]", 7000);
  EXPECT_EQ(q.host, "fe80::1%eth0");
  EXPECT_EQ(q.port, 7000);
  EXPECT_EQ(q.to_string(), "[fe80::1%eth0]:7000");
}

TEST(PeerAddress, Errors) {
  EXPECT_TRUE(contains(peer_error(""), "empty host"));
  EXPECT_TRUE(contains(peer_error(":7710"), "empty host"));
  EXPECT_TRUE(contains(peer_error("[]:7710"), "empty host"));
  EXPECT_TRUE(contains(peer_error("host:"), "empty port"));
  EXPECT_TRUE(contains(peer_error("[::1]:"), "empty port"));
  EXPECT_TRUE(contains(peer_error("host:http"), "port 'http' is not a number in 1..65535"));
  EXPECT_TRUE(contains(peer_error("host:0"), "1..65535"));
  EXPECT_TRUE(contains(peer_error("host:65536"), "1..65535"));
  EXPECT_TRUE(contains(peer_error("host:-1"), "1..65535"));
  EXPECT_TRUE(contains(peer_error("host:77x"), "1..65535"));
  EXPECT_TRUE(contains(peer_error("[::1:7710"), "no ']'"));
  EXPECT_TRUE(contains(peer_error("::1]:7710"), "brackets"));
  EXPECT_TRUE(contains(peer_error("host]:7710"), "unbalanced brackets"));
  EXPECT_TRUE(contains(peer_error("n[1-2]:7710"), "unbalanced brackets"));
  EXPECT_TRUE(contains(peer_error("[::1]7710"), "':port'"));
  EXPECT_TRUE(contains(peer_error("fe80::1"), "in brackets"));
}

// ---- resolve_membership ----------------------------------------------------

// An injectable environment; the map must outlive the input that points at it.
MembershipInput input(const std::map<std::string, std::string>& env) {
  MembershipInput in;
  in.getenv = [&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  return in;
}

const std::map<std::string, std::string> kNoEnv;

TEST(Membership, PeersWithExplicitRank) {
  // Slurm variables are present but the peer list wins.
  const std::map<std::string, std::string> env = {{"SLURM_JOB_NODELIST", "x[1-9]"}, {"SLURM_NODEID", "4"}};
  auto in = input(env);
  in.peers = {"10.0.0.1:7001", "10.0.0.2", "[::1]:7003"};
  in.rank = 2;
  in.default_port = 7100;
  auto m = resolve_membership(in);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  EXPECT_EQ(m->source, "peers");
  EXPECT_EQ(m->self, 2u);
  ASSERT_EQ(m->peers.size(), 3u);
  EXPECT_EQ(m->peers[0].to_string(), "10.0.0.1:7001");
  EXPECT_EQ(m->peers[1].to_string(), "10.0.0.2:7100");  // default port
  EXPECT_EQ(m->peers[2].to_string(), "[::1]:7003");
}

TEST(Membership, RankOutOfRange) {
  auto in = input(kNoEnv);
  in.peers = {"a", "b"};
  in.rank = 2;
  auto m = resolve_membership(in);
  ASSERT_FALSE(m.is_ok());
  EXPECT_EQ(m.status().err(), EINVAL);
  EXPECT_TRUE(contains(m.status().message(), "rank 2")) << m.status().message();
  EXPECT_TRUE(contains(m.status().message(), "2 peers")) << m.status().message();
}

TEST(Membership, BadPeerNamesTheEntry) {
  auto in = input(kNoEnv);
  in.peers = {"a:1", "b:99999"};
  in.rank = 0;
  auto m = resolve_membership(in);
  ASSERT_FALSE(m.is_ok());
  EXPECT_TRUE(contains(m.status().message(), "peer 'b:99999'")) << m.status().message();
}

TEST(Membership, RankFoundFromLocalAddresses) {
  auto in = input(kNoEnv);
  in.peers = {"10.0.0.1:7710", "10.0.0.2:7710", "node3:7710"};
  in.local_addresses = {"127.0.0.1", "::1", "10.0.0.2", "node2", "node2.cluster"};
  auto m = resolve_membership(in);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  EXPECT_EQ(m->self, 1u);
  EXPECT_EQ(m->source, "peers");

  in.local_addresses = {"192.168.1.9", "node3"};  // by host name
  m = resolve_membership(in);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  EXPECT_EQ(m->self, 2u);
}

TEST(Membership, NotAmongThePeers) {
  auto in = input(kNoEnv);
  in.peers = {"10.0.0.1:7710", "10.0.0.2:7710"};
  in.local_addresses = {"10.9.9.9", "elsewhere"};
  auto m = resolve_membership(in);
  ASSERT_FALSE(m.is_ok());
  const std::string msg = m.status().message();  // status() returns a copy: keep it
  EXPECT_EQ(m.status().err(), EINVAL);
  EXPECT_TRUE(contains(msg, "not among")) << msg;
  EXPECT_TRUE(contains(msg, "10.0.0.1:7710, 10.0.0.2:7710")) << msg;  // the peers
  EXPECT_TRUE(contains(msg, "10.9.9.9, elsewhere")) << msg;           // and this host
  EXPECT_TRUE(contains(msg, "--rank")) << msg;                        // and the way out
}

TEST(Membership, SeveralPeersOnThisHost) {
  // Two daemons on one host (different ports): the address alone cannot tell which one this is.
  auto in = input(kNoEnv);
  in.peers = {"127.0.0.1:7001", "127.0.0.1:7002", "10.0.0.3"};
  in.local_addresses = {"127.0.0.1"};
  auto m = resolve_membership(in);
  ASSERT_FALSE(m.is_ok());
  EXPECT_TRUE(contains(m.status().message(), "several")) << m.status().message();
  EXPECT_TRUE(contains(m.status().message(), "127.0.0.1:7002")) << m.status().message();
  in.rank = 1;  // which --rank resolves
  m = resolve_membership(in);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  EXPECT_EQ(m->self, 1u);
}

TEST(Membership, FromSlurm) {
  const std::map<std::string, std::string> env = {{"SLURM_JOB_NODELIST", "gpu[01-03],cpu7"}, {"SLURM_NODEID", "2"}};
  auto in = input(env);
  in.default_port = 7800;
  in.rank = 0;  // not used: Slurm's node id decides
  auto m = resolve_membership(in);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  EXPECT_EQ(m->source, "slurm");
  EXPECT_EQ(m->self, 2u);
  ASSERT_EQ(m->peers.size(), 4u);
  EXPECT_EQ(m->peers[0].to_string(), "gpu01:7800");
  EXPECT_EQ(m->peers[2].to_string(), "gpu03:7800");
  EXPECT_EQ(m->peers[3].to_string(), "cpu7:7800");
}

TEST(Membership, FromSlurmOlderVariable) {
  // SLURM_NODELIST (older name) when SLURM_JOB_NODELIST is absent or empty.
  for (auto env : {std::map<std::string, std::string>{{"SLURM_NODELIST", "n[1-2]"}, {"SLURM_NODEID", "1"}},
                   std::map<std::string, std::string>{
                       {"SLURM_JOB_NODELIST", ""}, {"SLURM_NODELIST", "n[1-2]"}, {"SLURM_NODEID", "1"}}}) {
    auto in = input(env);
    auto m = resolve_membership(in);
    ASSERT_TRUE(m.is_ok()) << m.status().message();
    EXPECT_EQ(m->source, "slurm");
    EXPECT_EQ(m->self, 1u);
    ASSERT_EQ(m->peers.size(), 2u);
    EXPECT_EQ(m->peers[1].host, "n2");
  }
}

TEST(Membership, SlurmErrorsNameTheVariable) {
  struct Case {
    std::map<std::string, std::string> env;
    std::vector<std::string> parts;  // what the message must say
  };
  const std::vector<Case> cases = {
      {{{"SLURM_JOB_NODELIST", "n[1-2]"}}, {"SLURM_JOB_NODELIST", "SLURM_NODEID is not"}},
      {{{"SLURM_JOB_NODELIST", "n[1-2]"}, {"SLURM_NODEID", "2"}}, {"SLURM_NODEID '2'", "below 2", "n[1-2]"}},
      {{{"SLURM_JOB_NODELIST", "n[1-2]"}, {"SLURM_NODEID", "one"}}, {"SLURM_NODEID 'one'"}},
      {{{"SLURM_JOB_NODELIST", "n[1-2]"}, {"SLURM_NODEID", ""}}, {"SLURM_NODEID ''"}},
      {{{"SLURM_JOB_NODELIST", "n[1-2]"}, {"SLURM_NODEID", "-1"}}, {"SLURM_NODEID '-1'"}},
      {{{"SLURM_JOB_NODELIST", "n[2-1]"}, {"SLURM_NODEID", "0"}}, {"SLURM_JOB_NODELIST", "n[2-1]", "reversed"}},
      {{{"SLURM_NODELIST", "n[1-2"}, {"SLURM_NODEID", "0"}}, {"SLURM_NODELIST", "n[1-2", "unbalanced"}},
  };
  for (const auto& c : cases) {
    auto in = input(c.env);
    auto m = resolve_membership(in);
    ASSERT_FALSE(m.is_ok()) << c.parts[0];
    EXPECT_EQ(m.status().err(), EINVAL);
    for (const auto& part : c.parts) EXPECT_TRUE(contains(m.status().message(), part)) << m.status().message();
  }
}

TEST(Membership, ClusterOfOne) {
  // No peers and no Slurm list (SLURM_NODEID alone is not a cluster).
  const std::map<std::string, std::string> env = {{"SLURM_NODEID", "3"}};
  auto in = input(env);
  in.default_port = 7999;
  auto m = resolve_membership(in);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  EXPECT_EQ(m->source, "single");
  EXPECT_EQ(m->self, 0u);
  ASSERT_EQ(m->peers.size(), 1u);
  EXPECT_EQ(m->peers[0].to_string(), "127.0.0.1:7999");
}

TEST(Membership, LocalAddressesOfThisHost) {
  // Whatever the machine, it has a host name; numeric addresses parse as peers.
  auto addrs = local_addresses();
  ASSERT_FALSE(addrs.empty());
  for (const auto& a : addrs) {
    EXPECT_FALSE(a.empty());
    const bool v6 = a.find(':') != std::string::npos;
    EXPECT_TRUE(parse_peer(v6 ? "[" + a + "]" : a, 1).is_ok()) << a;
  }
}

}  // namespace
}  // namespace dlfs::transport
