#include "transport/membership.h"

#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>

namespace dlfs::transport {
namespace {

constexpr size_t kMaxHosts = 65536;

bool parse_u64(std::string_view s, uint64_t& out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

// Splits at separators (',', ' ', tab: Slurm's set) that are not inside
// brackets. Runs of separators make no empty names, as in Slurm.
Result<std::vector<std::string_view>> split_top(std::string_view list) {
  std::vector<std::string_view> out;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= list.size(); ++i) {
    const char c = i < list.size() ? list[i] : ',';
    if (c == '[') ++depth;
    if (c == ']' && --depth < 0) return Status(EINVAL, "host list '" + std::string(list) + "': unbalanced ']'");
    if ((c == ',' || c == ' ' || c == '\t') && depth == 0) {
      if (i > start) out.push_back(list.substr(start, i - start));
      start = i + 1;
    }
  }
  if (depth != 0) return Status(EINVAL, "host list '" + std::string(list) + "': unbalanced '['");
  return out;
}

// The values of one bracket group "01-03,07".
Result<std::vector<std::string>> expand_group(std::string_view group, std::string_view whole) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i <= group.size(); ++i) {
    if (i < group.size() && group[i] != ',') continue;
    std::string_view item = group.substr(start, i - start);
    start = i + 1;
    const size_t dash = item.find('-');
    std::string_view lo = item.substr(0, dash), hi = dash == std::string_view::npos ? lo : item.substr(dash + 1);
    uint64_t a = 0, b = 0;
    if (!parse_u64(lo, a) || !parse_u64(hi, b))
      return Status(EINVAL, "host list '" + std::string(whole) + "': '" + std::string(item) + "' is not a number or range");
    if (b < a) return Status(EINVAL, "host list '" + std::string(whole) + "': range '" + std::string(item) + "' is reversed");
    if (b - a >= kMaxHosts) return Status(E2BIG, "host list '" + std::string(whole) + "' names too many hosts");
    const size_t width = lo.size() > 1 && lo[0] == '0' ? lo.size() : 0;  // keep the zero padding
    for (uint64_t k = 0; k <= b - a; ++k) {  // counts, so b = UINT64_MAX cannot wrap
      std::string s = std::to_string(a + k);
      if (s.size() < width) s.insert(0, width - s.size(), '0');
      out.push_back(std::move(s));
    }
  }
  return out;
}

}  // namespace

std::string PeerAddress::to_string() const {
  return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

Result<PeerAddress> parse_peer(std::string_view text, uint16_t default_port) {
  const std::string what = "peer '" + std::string(text) + "'";
  PeerAddress p;
  std::string_view port;
  if (!text.empty() && text[0] == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos) return Status(EINVAL, what + ": no ']' after the IPv6 address");
    p.host = std::string(text.substr(1, close - 1));
    std::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest[0] != ':') return Status(EINVAL, what + ": expected ':port' after ']'");
      port = rest.substr(1);
      if (port.empty()) return Status(EINVAL, what + ": empty port");
    }
  } else {
    const size_t colon = text.rfind(':');
    if (colon != std::string_view::npos && text.find(':') != colon)
      return Status(EINVAL, what + ": an IPv6 address must be in brackets ([::1]:7710)");
    p.host = std::string(text.substr(0, colon));
    if (colon != std::string_view::npos) {
      port = text.substr(colon + 1);
      if (port.empty()) return Status(EINVAL, what + ": empty port");
    }
  }
  if (p.host.empty()) return Status(EINVAL, what + ": empty host");
  // A stray bracket is a typo (a half-written IPv6 literal, a pasted hostlist), not a host name.
  if (p.host.find_first_of("[]") != std::string::npos) return Status(EINVAL, what + ": unbalanced brackets");
  uint64_t v = default_port;
  if (!port.empty() && (!parse_u64(port, v) || v == 0 || v > 65535))
    return Status(EINVAL, what + ": port '" + std::string(port) + "' is not a number in 1..65535");
  p.port = static_cast<uint16_t>(v);
  return p;
}

Result<std::vector<std::string>> expand_hostlist(std::string_view list) {
  auto items = split_top(list);
  if (!items) return items.status();
  if (items->empty()) return Status(EINVAL, "host list '" + std::string(list) + "' names no host");
  std::vector<std::string> out;
  for (std::string_view item : *items) {
    // Expand bracket groups left to right: a cartesian product.
    std::vector<std::string> names = {""};
    size_t pos = 0;
    while (pos < item.size()) {
      const size_t open = item.find('[', pos);
      std::string_view literal = item.substr(pos, open == std::string_view::npos ? std::string_view::npos : open - pos);
      for (auto& n : names) n += literal;
      if (open == std::string_view::npos) break;
      const size_t close = item.find(']', open);  // split_top checked the balance
      if (close == open + 1) return Status(EINVAL, "host list '" + std::string(list) + "' has an empty '[]'");
      auto values = expand_group(item.substr(open + 1, close - open - 1), list);
      if (!values) return values.status();
      std::vector<std::string> next;
      if (names.size() * values->size() > kMaxHosts)
        return Status(E2BIG, "host list '" + std::string(list) + "' names too many hosts");
      for (const auto& n : names)
        for (const auto& v : *values) next.push_back(n + v);
      names = std::move(next);
      pos = close + 1;
    }
    out.insert(out.end(), names.begin(), names.end());
    if (out.size() > kMaxHosts) return Status(E2BIG, "host list '" + std::string(list) + "' names too many hosts");
  }
  return out;
}

Result<Membership> resolve_membership(const MembershipInput& in) {
  Membership m;
  if (!in.peers.empty()) {
    m.source = "peers";
    for (const auto& text : in.peers) {
      auto p = parse_peer(text, in.default_port);
      if (!p) return p.status();
      m.peers.push_back(std::move(p).value());
    }
    if (in.rank) {
      if (*in.rank >= m.peers.size())
        return Status(EINVAL, "rank " + std::to_string(*in.rank) + " is not below the " +
                                  std::to_string(m.peers.size()) + " peers");
      m.self = *in.rank;
      return m;
    }
    std::vector<uint32_t> mine;
    for (uint32_t i = 0; i < m.peers.size(); ++i)
      if (std::find(in.local_addresses.begin(), in.local_addresses.end(), m.peers[i].host) != in.local_addresses.end())
        mine.push_back(i);
    if (mine.size() != 1) {
      std::string peers, local;
      for (const auto& p : m.peers) peers += (peers.empty() ? "" : ", ") + p.to_string();
      for (const auto& a : in.local_addresses) local += (local.empty() ? "" : ", ") + a;
      return Status(EINVAL, std::string(mine.empty() ? "this host is not among" : "this host matches several of") +
                                " the peers (" + peers + "; this host: " + local +
                                "): pass --rank or [cluster] rank");
    }
    m.self = mine[0];
    return m;
  }
  const char* list = in.getenv("SLURM_JOB_NODELIST");
  const char* list_name = "SLURM_JOB_NODELIST";
  if (list == nullptr || *list == '\0') {
    list = in.getenv("SLURM_NODELIST");
    list_name = "SLURM_NODELIST";
  }
  if (list != nullptr && *list != '\0') {
    m.source = "slurm";
    auto hosts = expand_hostlist(list);
    if (!hosts) return hosts.status().with_context(list_name);
    for (auto& h : *hosts) m.peers.push_back({std::move(h), in.default_port});
    const char* id = in.getenv("SLURM_NODEID");
    uint64_t v = 0;
    if (id == nullptr) return Status(EINVAL, std::string(list_name) + " is set but SLURM_NODEID is not");
    if (!parse_u64(id, v) || v >= m.peers.size())
      return Status(EINVAL, "SLURM_NODEID '" + std::string(id) + "' is not a node index below " +
                                std::to_string(m.peers.size()) + " (" + list_name + "=" + list + ")");
    m.self = static_cast<uint32_t>(v);
    return m;
  }
  m.source = "single";
  m.peers.push_back({"127.0.0.1", in.default_port});
  return m;
}

std::vector<std::string> local_addresses() {
  std::vector<std::string> out;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) == 0) {
    for (ifaddrs* a = list; a; a = a->ifa_next) {
      if (!a->ifa_addr || (a->ifa_addr->sa_family != AF_INET && a->ifa_addr->sa_family != AF_INET6)) continue;
      char host[NI_MAXHOST];
      socklen_t len = a->ifa_addr->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
      if (::getnameinfo(a->ifa_addr, len, host, sizeof host, nullptr, 0, NI_NUMERICHOST) == 0) out.push_back(host);
    }
    ::freeifaddrs(list);
  }
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) == 0 && name[0]) {
    out.push_back(name);
    std::string s = name;
    if (size_t dot = s.find('.'); dot != std::string::npos) out.push_back(s.substr(0, dot));
  }
  return out;
}

}  // namespace dlfs::transport
