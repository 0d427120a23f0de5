// The config values that need the machine: the job token file, the memory budget.
#include "fs/config/config.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>

#include <spdlog/fmt/fmt.h>

#include "common/decimal.h"
#include "common/units.h"

namespace dlfs::fs {

Result<std::string> load_job_token(const DaemonConfig& c) {
  if (!c.token.empty() && !c.token_file.empty())
    return Status(EINVAL, "cluster: set token or token_file, not both");
  if (c.token_file.empty()) return c.token;
  const std::string what = "job token file '" + c.token_file + "'";
  // O_NONBLOCK: opening a FIFO (or a device) for reading would wait for a
  // writer, forever and silently; it is refused below as not a regular file.
  int fd = ::open(c.token_file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return Status::from_errno(errno, what);
  struct stat st {};
  ::fstat(fd, &st);
  std::string token;
  Status s;
  if (!S_ISREG(st.st_mode)) s = Status(EINVAL, what + " is not a regular file");
  else if (st.st_mode & 077)
    s = Status(EPERM, what + " can be read by others (mode " + fmt::format("{:o}", st.st_mode & 0777) +
                          "): chmod 600 it");
  else if (st.st_uid != ::geteuid()) s = Status(EPERM, what + " is not owned by the daemon's user");
  else if (st.st_size > 4096) s = Status(EINVAL, what + " is larger than 4 KiB: is it the right file?");
  else {
    token.resize(static_cast<size_t>(st.st_size));
    ssize_t n = ::read(fd, token.data(), token.size());
    if (n < 0) s = Status::from_errno(errno, what);
    else token.resize(static_cast<size_t>(n));
  }
  ::close(fd);
  if (!s) return s;
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
  if (token.empty()) return Status(EINVAL, what + " is empty");
  return token;
}

Result<uint32_t> parse_view_mode(const std::string& text) {
  const Status bad(EINVAL, "view_mode '" + text + "' is not a mode: want read bits in octal, as 0440 or 0444");
  if (text.empty() || text.size() > 4) return bad;
  uint32_t mode = 0;
  for (char ch : text) {
    if (ch < '0' || ch > '7') return bad;
    mode = mode * 8 + static_cast<uint32_t>(ch - '0');
  }
  if (mode > 0777) return bad;  // "4440": no setuid and friends on a read-only view
  return mode;
}

Result<ListenAddress> parse_metrics_address(const std::string& text) {
  auto bad = [&text](const std::string& why) {
    return Status(EINVAL, "metrics_address '" + text + "' is not valid: " + why +
                              " (PORT, :PORT, HOST:PORT, [IPv6]:PORT; off for none)");
  };
  ListenAddress a;
  std::string port;
  if (!text.empty() && text[0] == '[') {
    const size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return bad("an IPv6 address is written [address]:PORT");
    a.host = text.substr(1, close - 1);
    a.ipv6 = true;
    port = text.substr(close + 2);
    in6_addr v6{};
    if (::inet_pton(AF_INET6, a.host.c_str(), &v6) != 1) return bad("'" + a.host + "' is not an IPv6 address");
  } else {
    const size_t colon = text.rfind(':');
    a.host = colon == std::string::npos ? "" : text.substr(0, colon);
    port = colon == std::string::npos ? text : text.substr(colon + 1);
    if (a.host.empty()) a.host = "127.0.0.1";  // loopback unless an address is given
    if (a.host.find(':') != std::string::npos) return bad("an IPv6 address must be in brackets");
    in_addr v4{};
    const bool name_chars = std::all_of(a.host.begin(), a.host.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.';
    });
    if (::inet_pton(AF_INET, a.host.c_str(), &v4) != 1 &&
        (!name_chars || a.host.size() > 253 || !std::isalnum(static_cast<unsigned char>(a.host[0]))))
      return bad("'" + a.host + "' is neither an IPv4 address nor a host name");
  }
  const auto p = parse_canonical_decimal(port);
  if (!p || *p < 1 || *p > 65535) return bad("the port must be a number from 1 to 65535");
  a.port = static_cast<uint16_t>(*p);
  return a;
}

Result<uint64_t> resolve_memory_budget(const std::string& text, uint64_t physical_bytes) {
  if (!text.empty() && text.back() == '%') {
    double pct = 0;
    try {
      size_t pos = 0;
      pct = std::stod(text.substr(0, text.size() - 1), &pos);
      if (pos != text.size() - 1) throw std::invalid_argument("trailing");
    } catch (...) {
      return Status(EINVAL, "memory budget '" + text + "' is not a percentage such as \"50%\"");
    }
    // Written so that NaN ("nan%", which stod reads) fails too: it compares false.
    if (!(pct > 0 && pct <= 100)) return Status(EINVAL, "memory budget '" + text + "' must be between 0% and 100%");
    return static_cast<uint64_t>(static_cast<double>(physical_bytes) * pct / 100.0);
  }
  auto r = parse_size(text);
  if (!r) return r.status().with_context("memory budget");
  return *r;
}

}  // namespace dlfs::fs
