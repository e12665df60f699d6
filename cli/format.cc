#include "cli/format.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <initializer_list>

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

// The length of the valid UTF-8 sequence at s[i] (1 for ASCII), or 0 when s[i] does not start
// one (a stray continuation byte, an overlong form, a surrogate, beyond U+10FFFF, cut short).
size_t Utf8Length(std::string_view s, size_t i) {
  auto c = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  auto cont = [&](size_t k) { return i + k < s.size() && (c(k) & 0xC0) == 0x80; };
  unsigned char b = c(0);
  if (b < 0x80) return 1;
  if (b >= 0xC2 && b <= 0xDF) return cont(1) ? 2 : 0;
  if (b >= 0xE0 && b <= 0xEF) {
    if (!cont(1) || !cont(2)) return 0;
    if (b == 0xE0 && c(1) < 0xA0) return 0;   // overlong
    if (b == 0xED && c(1) >= 0xA0) return 0;  // surrogates
    return 3;
  }
  if (b >= 0xF0 && b <= 0xF4) {
    if (!cont(1) || !cont(2) || !cont(3)) return 0;
    if (b == 0xF0 && c(1) < 0x90) return 0;   // overlong
    if (b == 0xF4 && c(1) >= 0x90) return 0;  // beyond U+10FFFF
    return 4;
  }
  return 0;
}

namespace {

constexpr char kHexDigits[] = "0123456789abcdef";

// Whether the valid sequence s[i, i+n) is a character EscapeText escapes.
bool IsEscapedCharacter(std::string_view s, size_t i, size_t n) {
  auto c = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  if (n == 1) return c(0) < 0x20 || c(0) == 0x7F;
  if (n == 2) return c(0) == 0xC2 && c(1) <= 0x9F;  // U+0080-U+009F
  if (n == 3 && c(0) == 0xE2 && c(1) == 0x80) return c(2) >= 0xA8 && c(2) <= 0xAE;
  if (n == 3 && c(0) == 0xE2 && c(1) == 0x81) return c(2) >= 0xA6 && c(2) <= 0xA9;
  if (n == 3 && c(0) == 0xEF && c(1) == 0xBF) return c(2) >= 0xBE;  // U+FFFE, U+FFFF
  return false;
}

void AppendEscapedByte(std::string* out, unsigned char b) {
  *out += "\\x";
  *out += kHexDigits[b >> 4];
  *out += kHexDigits[b & 15];
}

struct Replacement {
  char c;
  const char* with;
};

// `s` with each character that has a replacement replaced by it.
std::string ReplaceCharacters(std::string_view s, std::initializer_list<Replacement> table) {
  std::string out;
  for (char c : s) {
    auto r =
        std::find_if(table.begin(), table.end(), [c](const Replacement& x) { return x.c == c; });
    if (r == table.end())
      out += c;
    else
      out += r->with;
  }
  return out;
}

}  // namespace

std::string EscapeText(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t n = Utf8Length(s, i);
    if (n == 0) {
      AppendEscapedByte(&out, static_cast<unsigned char>(s[i]));
      ++i;
      continue;
    }
    if (IsEscapedCharacter(s, i, n)) {
      for (size_t k = 0; k < n; ++k) AppendEscapedByte(&out, static_cast<unsigned char>(s[i + k]));
    } else {
      out.append(s, i, n);
    }
    i += n;
  }
  return out;
}

std::string MarkdownText(std::string_view s) {
  std::string out;
  for (char c : EscapeText(s)) {
    if (std::string_view("\\`*_~[]<>|#&!$").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

std::string MarkdownCode(std::string_view s) {
  std::string text = EscapeText(s);
  size_t run = 0, longest = 0;
  for (char& c : text) {
    if (c == '|') c = ' ';
    run = c == '`' ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  if (longest == 0) return "`" + text + "`";
  // A span's content that begins or ends with a backtick needs a space inside the fence (one
  // space each side is stripped when rendered).
  std::string fence(std::max<size_t>(2, longest + 1), '`');
  return fence + " " + text + " " + fence;
}

std::string XmlText(std::string_view s) {
  return ReplaceCharacters(
      EscapeText(s),
      {{'&', "&amp;"}, {'<', "&lt;"}, {'>', "&gt;"}, {'"', "&quot;"}, {'\'', "&apos;"}});
}

std::string SarifMessageText(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '\\' || c == '[' || c == ']') out += '\\';
    out += c;
  }
  return out;
}

std::string GithubCommandData(std::string_view s) {
  return ReplaceCharacters(EscapeText(s), {{'%', "%25"}, {'\r', "%0D"}, {'\n', "%0A"}});
}

std::string GithubCommandProperty(std::string_view s) {
  return ReplaceCharacters(GithubCommandData(s), {{':', "%3A"}, {',', "%2C"}});
}

size_t DisplayWidth(const std::string& s) {
  size_t w = 0;
  for (unsigned char c : s)
    if ((c & 0xC0) != 0x80) ++w;
  return w;
}

std::string Fit(const std::string& text, size_t width) {
  std::string s = EscapeText(text);
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

std::string FitLeft(const std::string& text, size_t width) {
  std::string s = EscapeText(text);
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

std::string Wrap(const std::string& first, const std::string& indent, const std::string& raw,
                 size_t width) {
  const std::string text = EscapeText(raw);
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
