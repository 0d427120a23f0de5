// A text's lines, for tests that compare rendered output line by line.
#pragma once

#include <sstream>
#include <string>
#include <vector>

namespace dlfs::testing {

inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

}  // namespace dlfs::testing
