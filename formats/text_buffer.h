// TextBuffer: appends text into a caller-provided fixed buffer.
//
// Async-signal-safe: no malloc, no locale, no stdio. Used for the human message, the event
// log lines and everything the forked child or the SIGSEGV handler prints. Overflow
// truncates and sets truncated(); the buffer always stays NUL-terminated.
#pragma once

#include <cstddef>
#include <cstdint>

namespace forkguard {

class TextBuffer {
 public:
  TextBuffer(char* buf, size_t cap) : buf_(buf), cap_(cap) {
    if (cap_ > 0) buf_[0] = '\0';
  }

  const char* data() const { return buf_; }
  size_t size() const { return len_; }
  bool truncated() const { return truncated_; }
  void Clear() {
    len_ = 0;
    truncated_ = false;
    if (cap_ > 0) buf_[0] = '\0';
  }

  TextBuffer& Char(char c) {
    if (cap_ == 0 || len_ + 1 >= cap_) {
      truncated_ = true;
      return *this;
    }
    buf_[len_++] = c;
    buf_[len_] = '\0';
    return *this;
  }
  TextBuffer& Str(const char* s) {
    if (s == nullptr) s = "(null)";
    return Mem(s, __builtin_strlen(s));
  }
  // A JSON object's member name: `,"key":` after its first member, `{"key":` opening it.
  TextBuffer& Key(const char* key) { return Str(",\"").Str(key).Str("\":"); }
  TextBuffer& FirstKey(const char* key) { return Str("{\"").Str(key).Str("\":"); }
  // `"s"`, for a name that needs no escaping (JsonStr escapes).
  TextBuffer& Quoted(const char* s) { return Char('"').Str(s).Char('"'); }
  TextBuffer& Mem(const char* s, size_t n) {
    if (cap_ == 0) {
      truncated_ = true;
      return *this;
    }
    size_t room = cap_ - 1 - len_;
    if (n > room) {
      n = room;
      truncated_ = true;
    }
    __builtin_memcpy(buf_ + len_, s, n);
    len_ += n;
    buf_[len_] = '\0';
    return *this;
  }
  TextBuffer& Dec(int64_t v) {
    if (v < 0) {
      Char('-');
      // Avoid overflow on INT64_MIN.
      return UDec(static_cast<uint64_t>(-(v + 1)) + 1);
    }
    return UDec(static_cast<uint64_t>(v));
  }
  TextBuffer& UDec(uint64_t v) {
    char tmp[24];
    int n = 0;
    do {
      tmp[n++] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v != 0);
    while (n > 0) Char(tmp[--n]);
    return *this;
  }
  // Lower-case hex without prefix: the shim's one hex formatter.
  static constexpr char kHexDigits[] = "0123456789abcdef";
  TextBuffer& Hex(uint64_t v) {
    char tmp[20];
    int n = 0;
    do {
      tmp[n++] = kHexDigits[v & 0xf];
      v >>= 4;
    } while (v != 0);
    while (n > 0) Char(tmp[--n]);
    return *this;
  }
  TextBuffer& Ptr(uint64_t v) { return Str("0x").Hex(v); }
  // Two hex digits per byte (build ids).
  TextBuffer& HexBytes(const uint8_t* p, size_t n) {
    for (size_t i = 0; i < n; ++i) Char(kHexDigits[p[i] >> 4]).Char(kHexDigits[p[i] & 0xf]);
    return *this;
  }

  // A JSON string literal including the quotes; escapes per RFC 8259. Bytes >= 0x80 are
  // passed through when they form valid UTF-8 and replaced by U+FFFD otherwise, so every
  // line stays valid JSON whatever a path or argv contains.
  TextBuffer& JsonStr(const char* s) {
    if (s == nullptr) return Str("null");
    Char('"');
    const auto* p = reinterpret_cast<const unsigned char*>(s);
    while (*p != '\0') {
      unsigned char c = *p;
      if (c == '"' || c == '\\') {
        Char('\\').Char(static_cast<char>(c));
        ++p;
      } else if (c == '\n') {
        Str("\\n");
        ++p;
      } else if (c == '\t') {
        Str("\\t");
        ++p;
      } else if (c == '\r') {
        Str("\\r");
        ++p;
      } else if (c < 0x20 || c == 0x7f) {
        Str("\\u00").HexBytes(&c, 1);
        ++p;
      } else if (c < 0x80) {
        Char(static_cast<char>(c));
        ++p;
      } else {
        int n = Utf8SequenceLength(p);
        if (n == 0) {
          Str("\\ufffd");
          ++p;
        } else {
          Mem(reinterpret_cast<const char*>(p), static_cast<size_t>(n));
          p += n;
        }
      }
    }
    return Char('"');
  }

  // "4.0 MiB", "512 B", "1.5 GiB": one decimal, binary units.
  TextBuffer& Size(uint64_t bytes) {
    static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    if (bytes < 1024) return UDec(bytes).Str(" B");
    int unit = 0;
    uint64_t whole = bytes;
    uint64_t scale = 1;
    while (whole >= 1024 && unit < 5) {
      whole /= 1024;
      scale *= 1024;
      ++unit;
    }
    // Tenths, rounded to nearest.
    unsigned __int128 tenths = (static_cast<unsigned __int128>(bytes) * 10 + scale / 2) / scale;
    UDec(static_cast<uint64_t>(tenths / 10)).Char('.').UDec(static_cast<uint64_t>(tenths % 10));
    return Char(' ').Str(kUnits[unit]);
  }

 private:
  // Length of a valid UTF-8 sequence at p (1..4), or 0 when invalid.
  static int Utf8SequenceLength(const unsigned char* p) {
    unsigned char c = p[0];
    int n;
    uint32_t cp;
    if (c >= 0xc2 && c <= 0xdf) {
      n = 2;
      cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
      n = 3;
      cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      n = 4;
      cp = c & 0x07;
    } else {
      return 0;
    }
    for (int i = 1; i < n; ++i) {
      if ((p[i] & 0xc0) != 0x80) return 0;
      cp = (cp << 6) | (p[i] & 0x3f);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff)) {
      return 0;
    }
    return n;
  }

  char* buf_;
  size_t cap_;
  size_t len_ = 0;
  bool truncated_ = false;
};

}  // namespace forkguard
