#include "common/roff.h"

#include <cctype>
#include <cstdio>

namespace dlfs::roff {
namespace {

// The code point of the UTF-8 sequence at text[i] (advancing i past it), or
// U+FFFD for a malformed one.
char32_t decode_utf8(std::string_view text, size_t& i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  const int extra = lead >= 0xF8 ? -1 : lead >= 0xF0 ? 3 : lead >= 0xE0 ? 2 : lead >= 0xC0 ? 1 : -1;
  if (extra < 0 || i + extra >= text.size()) {  // a continuation byte first, or cut short
    ++i;
    return 0xFFFD;
  }
  char32_t cp = lead & (0x3F >> extra);
  for (int k = 1; k <= extra; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) {
      ++i;
      return 0xFFFD;
    }
    cp = (cp << 6) | (byte(i + k) & 0x3F);
  }
  i += extra + 1;
  return cp;
}

// escape(), keeping a line's leading blanks when `keep_indent` (no-fill blocks).
std::string escape_text(std::string_view text, bool keep_indent) {
  std::string out;
  out.reserve(text.size() + text.size() / 8);
  bool line_start = true;
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (c == '\n') {
      out += '\n';
      line_start = true;
      ++i;
      continue;
    }
    if (line_start && !keep_indent && (c == ' ' || c == '\t')) {
      ++i;
      continue;
    }
    if (static_cast<unsigned char>(c) >= 0x80) {
      char buf[16];
      std::snprintf(buf, sizeof buf, "\\[u%04X]", static_cast<unsigned>(decode_utf8(text, i)));
      out += buf;
      line_start = false;
      continue;
    }
    switch (c) {
      case '\\': out += "\\e"; break;
      case '-': out += "\\-"; break;
      case '\'': out += "\\(aq"; break;
      case '`': out += "\\(ga"; break;
      case '\t': out += ' '; break;
      case '.':
        if (line_start) out += "\\&";
        out += '.';
        break;
      default:
        if (static_cast<unsigned char>(c) >= 0x20 && c != 0x7F) out += c;  // other control characters: dropped
    }
    line_start = false;
    ++i;
  }
  return out;
}

// A macro argument: escaped, in double quotes (a quote inside as \(dq).
std::string argument(std::string_view text) {
  std::string out = "\"";
  for (char c : escape_text(text, false)) {
    if (c == '"') out += "\\(dq";
    else if (c == '\n') out += ' ';
    else out += c;
  }
  return out + "\"";
}

}  // namespace

std::string escape(std::string_view text) { return escape_text(text, false); }

std::string bold(std::string_view text) { return "\\fB\\%" + escape(text) + "\\fR"; }

std::string italic(std::string_view text) { return "\\fI\\%" + escape(text) + "\\fR"; }

Page::Page(std::string_view name, int section, std::string_view source, std::string_view manual) {
  std::string upper(name);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  out_ = ".TH " + argument(upper) + " " + std::to_string(section) + " \"\" " + argument(source) + " " +
         argument(manual) + "\n";
  // No hyphenation and a ragged right margin: the pages are full of paths,
  // flags and identifiers that a break inside would misquote.
  out_ += ".nh\n.ad l\n";
}

Page& Page::heading(std::string_view title) {
  out_ += ".SH " + argument(title) + "\n";
  return *this;
}

Page& Page::subheading(std::string_view title) {
  out_ += ".SS " + argument(title) + "\n";
  return *this;
}

Page& Page::name_line(std::string_view name, std::string_view what) {
  out_ += ".SH NAME\n" + escape(name) + " \\- " + escape(what) + "\n";
  return *this;
}

Page& Page::para(std::string_view text) {
  // An empty line (blanks aside) ends a paragraph.
  size_t begin = 0;
  std::string chunk;
  const auto flush = [&] {
    if (chunk.find_first_not_of(" \t\n") != std::string::npos) {
      out_ += ".PP\n";
      filled(chunk);
    }
    chunk.clear();
  };
  while (begin <= text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(begin, end - begin);
    if (line.find_first_not_of(" \t") == std::string_view::npos) flush();
    else chunk.append(line).append("\n");
    begin = end + 1;
  }
  flush();
  return *this;
}

Page& Page::tagged(std::string_view tag_roff, std::string_view text) {
  out_ += ".TP\n";
  out_ += tag_roff;
  out_ += "\n";
  filled(text);
  return *this;
}

Page& Page::example(std::string_view lines) {
  out_ += ".PP\n.RS 4\n.nf\n";
  size_t begin = 0;
  while (begin < lines.size()) {
    size_t end = lines.find('\n', begin);
    if (end == std::string_view::npos) end = lines.size();
    std::string_view line = lines.substr(begin, end - begin);
    // An empty input line is a blank line to groff but a warning to some
    // formatters: say it with .sp.
    out_ += line.find_first_not_of(" \t") == std::string_view::npos ? ".sp" : escape_text(line, true);
    out_ += "\n";
    begin = end + 1;
  }
  out_ += ".fi\n.RE\n";
  return *this;
}

Page& Page::roff_line(std::string_view roff) {
  out_.append(roff).append("\n");
  return *this;
}

void Page::filled(std::string_view text) {
  // Each input line escaped on its own; empty ones (they would be blank
  // lines in the output) dropped.
  const std::string escaped = escape(text);
  size_t begin = 0;
  while (begin < escaped.size()) {
    size_t end = escaped.find('\n', begin);
    if (end == std::string::npos) end = escaped.size();
    if (end > begin) out_.append(escaped, begin, end - begin).append("\n");
    begin = end + 1;
  }
}

}  // namespace dlfs::roff
