#include "cli/format.h"

#include <cinttypes>
#include <cstdio>

namespace forkguard::cli {

std::string Hex(uint64_t v) {
  char buf[24];
  snprintf(buf, sizeof buf, "0x%" PRIx64, v);
  return buf;
}

std::string HexBytes(const unsigned char* p, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s += kDigits[p[i] >> 4];
    s += kDigits[p[i] & 15];
  }
  return s;
}

std::string FormatBytes(int64_t b) {
  char buf[32];
  if (b >= (int64_t{1} << 30))
    snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(b) / (1 << 30));
  else if (b >= (1 << 20))
    snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(b) / (1 << 20));
  else if (b >= (1 << 10))
    snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(b) / (1 << 10));
  else
    snprintf(buf, sizeof buf, "%" PRId64 " B", b);
  return buf;
}

std::string FormatMs(int64_t ms) {
  char buf[32];
  if (ms < 1000)
    snprintf(buf, sizeof buf, "%" PRId64 " ms", ms);
  else
    snprintf(buf, sizeof buf, "%.1f s", static_cast<double>(ms) / 1000);
  return buf;
}

std::string Plural(int64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

std::string Basename(const std::string& p) {
  size_t s = p.rfind('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

std::string Dirname(const std::string& p) {
  size_t s = p.rfind('/');
  if (s == std::string::npos) return ".";
  return s == 0 ? "/" : p.substr(0, s);
}

size_t DisplayWidth(const std::string& s) {
  size_t w = 0;
  for (unsigned char c : s)
    if ((c & 0xC0) != 0x80) ++w;
  return w;
}

std::string Fit(const std::string& s, size_t width) {
  if (DisplayWidth(s) <= width) return s;
  std::string out;
  size_t w = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if ((c & 0xC0) != 0x80) {
      if (w + 1 >= width) break;
      ++w;
    }
    out.push_back(s[i]);
  }
  while (!out.empty() && (static_cast<unsigned char>(out.back()) & 0xC0) == 0xC0) out.pop_back();
  return out + "…";
}

std::string FitLeft(const std::string& s, size_t width) {
  if (DisplayWidth(s) <= width) return s;
  size_t drop = DisplayWidth(s) - width + 1, i = 0;
  for (size_t seen = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) {
      if (seen == drop) break;
      ++seen;
    }
  }
  return "…" + s.substr(i);
}

std::string Wrap(const std::string& first, const std::string& indent, const std::string& text,
                 size_t width) {
  std::string out, line = first;
  size_t pos = 0;
  bool empty_line = first.empty() || first.back() == ' ';
  while (pos < text.size()) {
    size_t sp = text.find(' ', pos);
    std::string word = text.substr(pos, sp == std::string::npos ? std::string::npos : sp - pos);
    pos = sp == std::string::npos ? text.size() : sp + 1;
    if (!empty_line && DisplayWidth(line) + 1 + DisplayWidth(word) > width) {
      out += Fit(line, width) + "\n";
      line = indent;
      empty_line = true;
    }
    if (!empty_line) line += " ";
    line += word;
    empty_line = false;
  }
  out += Fit(line, width) + "\n";
  return out;
}

}  // namespace forkguard::cli
