#include "cli/fuzz_log_program.h"

#include <cstdint>
#include <cstdio>
#include <iterator>
#include <string>
#include <vector>

#include "formats/event_schema.h"

namespace forkguard::cli::fuzz {
namespace {

using schema::EventType;
using schema::Key;

template <typename T, size_t N>
const T& Pick(FuzzedDataProvider* in, const T (&list)[N]) {
  return list[in->ConsumeIntegralInRange<size_t>(0, N - 1)];
}

// Numbers as JSON text: the edges of int64 and uint64 and past them, doubles that no
// integer holds, and the epoch-nanosecond values real logs carry.
constexpr const char* kNumbers[] = {
    "0",
    "1",
    "-1",
    "2",
    "7",
    "4096",
    "9223372036854775807",
    "-9223372036854775808",
    "9223372036854775806",
    "-9223372036854775807",
    "9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "-9223372036854775809",
    "4611686018427387904",
    "-4611686018427387904",
    "1764500000000000000",
    "1764500000000001000",
    "2147483647",
    "-2147483648",
    "4294967295",
    "4294967296",
    "1e300",
    "-1e300",
    "1.5",
    "-0",
    "1e19",
    "9.2233720368547758e18",
    "1e-300",
    "123456789012345678901234567890",
};

// Names of the schema's vocabulary (values of enum-like fields), and of the stacks.
constexpr const char* kWords[] = {
    "hazard",
    "clean",
    "child-segv",
    "parent-corruption",
    "inherited-rdma",
    "unknown",
    "proceeded",
    "failed",
    "aborted",
    "off",
    "fork",
    "_Fork",
    "daemon",
    "forkpty",
    "atfork",
    "backstop",
    "anonymous",
    "thp",
    "hugetlb",
    "shared",
    "private-file",
    "nothing",
    "dontfork",
    "probe-intact",
    "probe-stale",
    "reported-cof",
    "unknown-kernel",
    "library-cache",
    "ucx-fork-init",
    "preexec-fn",
    "dataloader",
    "python-fork",
    "c-program",
    "ibv_open_device",
    "ibv_reg_mr",
    "ibv_reg_mr_iova2",
    "ibv_dereg_mr",
    "ibv_fork_init",
    "posix_spawn",
    "vfork",
    "rxe0",
    "mlx5_0",
    "warn",
    "error",
    "netlink",
    "preload-removed",
    "static",
    "setuid",
    "librdmacm",
    "RDMAV_FORK_SAFE=1",
    "libibverbs.so.1",
    "trainer",
    "python3",
    "h1",
    "h2",
    "j9",
    "build_loader",
    "train.py",
    "main",
    "_ZN3foo3barEv",
    "Loader::start",
    "/nonexistent/libx.so",
    "/nonexistent/trainer",
    "libtorch_cpu.so",
    "",
    "0x0",
    "0x7f0012",
    "0xffffffffffffffff",
    "0x10000000000000000",
    "0x",
    "0xg",
    "not-probed",
};

// Hostile names: what the report must print without breaking its output or a terminal.
constexpr const char* kHostile[] = {
    "\n",
    "\r",
    "line\nkind=* frame=lib:*",
    "\n::error::injected",
    "\x1b[31mred\x1b[0m",
    "\x1b]0;title\x07",
    "<script>alert(1)</script>",
    "]]></failure>",
    "`*_[x](y)!|#",
    "\"quoted\\\"",
    "a\tb",
    "\x7f\x01\x02",
    "%s%n%x",
    "__FORKGUARD_REPORT__",
    "/*",
    "..",
    "*",
    "?",
};

// Invalid UTF-8 and lone surrogates (as raw bytes; \u escapes are written by the escaper).
constexpr const char* kBadUtf8[] = {
    "\xff\xfe", "\xc0\xaf", "\xed\xa0\x80", "\xe2\x82", "\xf4\x90\x80\x80", "abc\x80",
};

// The edges themselves, drawn more often than the rest: a sum or difference of two of them
// overflows.
constexpr const char* kEdges[] = {
    "9223372036854775807",  "-9223372036854775808", "9223372036854775806",
    "-9223372036854775807", "4611686018427387904",  "-4611686018427387904",
};

// A few input bytes each: what a value costs decides how many lines an input writes.
std::string Number(FuzzedDataProvider* in) {
  switch (in->ConsumeIntegralInRange<int>(0, 5)) {
    case 0:
      return Pick(in, kEdges);
    case 1:
      return Pick(in, kNumbers);
    case 2: {  // +-2^k plus a little: every magnitude, the edges of each
      uint64_t v = uint64_t{1} << in->ConsumeIntegralInRange<int>(0, 63);
      v += static_cast<uint64_t>(static_cast<int64_t>(in->ConsumeIntegral<int8_t>()));
      return std::to_string(in->ConsumeBool() ? static_cast<int64_t>(v)
                                              : static_cast<int64_t>(0 - v));
    }
    case 3:
      return std::to_string(in->ConsumeIntegralInRange<int64_t>(-2, 64));
    default:  // epoch nanoseconds, microseconds apart
      return std::to_string(1764500000000000000LL + 1000LL * in->ConsumeIntegral<uint16_t>());
  }
}

std::string Hex(FuzzedDataProvider* in) {
  char buf[32];
  if (in->ConsumeBool()) return Pick(in, kWords);
  uint64_t v = (uint64_t{1} << in->ConsumeIntegralInRange<int>(0, 63)) +
               static_cast<uint64_t>(static_cast<int64_t>(in->ConsumeIntegral<int8_t>()));
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

// A JSON string literal. Mostly escaped (control characters and every byte of 0x80 and up as
// \u00XX: the line stays valid UTF-8, so the reader keeps it and the renderers get the
// characters); sometimes raw, so control bytes and invalid UTF-8 reach the parser as they are
// (simdjson rejects the line).
std::string Quote(const std::string& s, bool raw) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if ((c < 0x20 || c >= 0x80) && !raw) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

}  // namespace

std::string GenerateName(FuzzedDataProvider* in) {
  switch (in->ConsumeIntegralInRange<int>(0, 7)) {
    case 0:
    case 1:
    case 2:
      return Pick(in, kWords);
    case 3:
      return Pick(in, kHostile);
    case 4:
      return std::string(Pick(in, kWords)) + Pick(in, kBadUtf8);
    case 5: {  // long: past the shim's field limits, the report's widths and line caps
      static constexpr size_t kLengths[] = {95,  96,  127,  128,  239,  240,
                                            241, 271, 1023, 1024, 4096, 16384};
      std::string s(Pick(in, kLengths), 'a' + in->ConsumeIntegralInRange<int>(0, 25));
      if (in->ConsumeBool()) s += Pick(in, kHostile);
      return s;
    }
    case 6:
      return std::string(Pick(in, kWords)) + Pick(in, kHostile) + Pick(in, kWords);
    default:
      return in->ConsumeRandomLengthString(24);
  }
}

namespace {

class LineWriter {
 public:
  LineWriter(FuzzedDataProvider* in, bool v1) : in_(in), v1_(v1) {}

  // A value of any type, or nesting `depth` levels deep.
  std::string Wild(int depth) {
    switch (in_->ConsumeIntegralInRange<int>(0, 8)) {
      case 0:
        return "null";
      case 1:
        return in_->ConsumeBool() ? "true" : "false";
      case 2:
      case 3:
        return Number(in_);
      case 4:
        return Quote(GenerateName(in_), in_->ConsumeIntegralInRange<int>(0, 7) == 0);
      case 5: {
        if (depth > 3) return "[]";
        std::string s = "[";
        int n = in_->ConsumeIntegralInRange<int>(0, 4);
        for (int i = 0; i < n; ++i) s += (i ? "," : "") + Wild(depth + 1);
        return s + "]";
      }
      case 6: {
        if (depth > 3) return "{}";
        std::string s = "{";
        int n = in_->ConsumeIntegralInRange<int>(0, 3);
        for (int i = 0; i < n; ++i) {
          s += (i ? "," : "") + Quote(AnyKeyName(), false) + ":" + Wild(depth + 1);
        }
        return s + "}";
      }
      case 7: {  // deep nesting: the reader caps depth
        static constexpr int kDepths[] = {16, 64, 65, 128, 1024, 1025, 3000};
        int d = Pick(in_, kDepths);
        bool obj = in_->ConsumeBool();
        std::string s;
        for (int i = 0; i < d; ++i) s += obj ? "{\"a\":" : "[";
        s += "1";
        for (int i = 0; i < d; ++i) s += obj ? "}" : "]";
        return s;
      }
      default:
        return Quote(Hex(in_), false);
    }
  }

  // The value of `key` as the shim writes it, or (one time in eight) any value.
  std::string Value(Key key) {
    return in_->ConsumeIntegralInRange<int>(0, 7) == 0 ? Wild(0) : Typed(key);
  }

  // The value of `key` with the type the schema gives it.
  std::string Typed(Key key) {
    switch (key) {
      case Key::kSchema:
        return Quote(in_->ConsumeIntegralInRange<int>(0, 7) == 0 ? "forkguard.event/3"
                     : v1_                                       ? schema::kEventV1
                                                                 : schema::kEventV2,
                     false);
      case Key::kEvent:
        return Quote(schema::kEventTypeNames[in_->ConsumeIntegralInRange<unsigned>(
                         0, static_cast<unsigned>(EventType::kCount) - 1)],
                     false);
      case Key::kAddr:
      case Key::kLen:
        return in_->ConsumeIntegralInRange<int>(0, 3) == 0 ? Quote(Hex(in_), false) : Number(in_);
      case Key::kTs:
      case Key::kTsNs:
      case Key::kSeq:
      case Key::kTid:
      case Key::kPid:
      case Key::kPpid:
      case Key::kRank:
      case Key::kLocalRank:
      case Key::kStep:
      case Key::kStartNs:
      case Key::kId:
      case Key::kLine:
      case Key::kErrno:
      case Key::kResult:
      case Key::kAgeMs:
      case Key::kContexts:
      case Key::kPds:
      case Key::kMrs:
      case Key::kCmChannels:
      case Key::kCmIds:
      case Key::kUverbsFds:
      case Key::kRdmaCmFds:
      case Key::kThreads:
      case Key::kMaxMapCount:
      case Key::kMapCount:
      case Key::kRdmaCore:
      case Key::kChildPid:
      case Key::kSignal:
      case Key::kStatus:
      case Key::kN:
      case Key::kBytes:
      case Key::kDeregs:
      case Key::kAccess:
        return Number(in_);
      case Key::kBase:
      case Key::kBuildId:
      case Key::kIp:
      case Key::kOff:
      case Key::kSymoff:
      case Key::kHandle:
      case Key::kSite:
        return Quote(Hex(in_), false);
      case Key::kOk:
      case Key::kDontfork:
      case Key::kReported:
      case Key::kAllowed:
      case Key::kPartial:
      case Key::kChildExecs:
      case Key::kKernelCof:
      case Key::kOn:
      case Key::kSafe:
      case Key::kHeldRdma:
        return in_->ConsumeBool() ? "true" : "false";
      case Key::kArgv:
      case Key::kReasons:
      case Key::kWhy: {
        std::string s = "[";
        int n = in_->ConsumeIntegralInRange<int>(0, 3);
        for (int i = 0; i < n; ++i) s += (i ? "," : "") + Quote(GenerateName(in_), false);
        return s + "]";
      }
      case Key::kMr:
        return "[" + Number(in_) + "," + Number(in_) + "," + Number(in_) + "," + Number(in_) + "]";
      case Key::kStack:
      case Key::kRegStack:
        return Stack();
      case Key::kFrames:
        return Frames();
      case Key::kRanges:
      case Key::kSites: {
        std::string s = "[";
        int n = in_->ConsumeIntegralInRange<int>(0, 3);
        for (int i = 0; i < n; ++i) s += (i ? "," : "") + Object(key);
        return s + "]";
      }
      case Key::kInit:
      case Key::kLive:
      case Key::kForkSupport:
      case Key::kRange:
      case Key::kPy:
        return in_->ConsumeIntegralInRange<int>(0, 7) == 0 ? "null" : Object(key);
      case Key::kPinProbe:
        return "{\"anonymous\":" + Quote(GenerateName(in_), false) +
               ",\"thp\":" + Quote(GenerateName(in_), false) +
               ",\"hugetlb\":" + Quote(GenerateName(in_), false) + "}";
      default:  // names: host, prog, job, path, verdict, call, text, ...
        return Quote(GenerateName(in_), in_->ConsumeIntegralInRange<int>(0, 15) == 0);
    }
  }

  // A line of record `type` (/2: after the header; /1: every line carries the identity).
  std::string Record(EventType type) {
    std::vector<Key> keys;
    if (v1_) {
      for (Key k : {Key::kSchema, Key::kEvent, Key::kTsNs, Key::kPid, Key::kPpid, Key::kTid,
                    Key::kHost, Key::kProg, Key::kRank, Key::kLocalRank, Key::kJob, Key::kSeq})
        keys.push_back(k);
      if (type == EventType::kMrRegister) {
        for (Key k : {Key::kAddr, Key::kLen, Key::kAccess, Key::kHandle}) keys.push_back(k);
      }
    } else if (type != EventType::kHeader) {
      keys.push_back(Key::kEvent);
      if (type != EventType::kModule && type != EventType::kStackRecord) {
        for (Key k : {Key::kTs, Key::kSeq, Key::kTid}) keys.push_back(k);
      }
    }
#define FORKGUARD_X(T, K) \
  if (type == EventType::k##T && !(v1_ && Key::k##K == Key::kEvent)) keys.push_back(Key::k##K);
    FORKGUARD_RECORD_KEYS(FORKGUARD_X)
#undef FORKGUARD_X
    // Each key present (mostly), a few extra keys, a duplicate now and then.
    bool drop_some = in_->ConsumeIntegralInRange<int>(0, 3) == 0;
    std::string s = "{";
    bool first = true;
    auto add = [&](const std::string& name, const std::string& value) {
      s += (first ? "" : ",") + Quote(name, false) + ":" + value;
      first = false;
    };
    for (Key k : keys) {
      if (drop_some && in_->ConsumeBool()) continue;
      if (k == Key::kEvent) {
        add(schema::KeyName(k), Quote(schema::EventTypeName(type), false));
      } else if (v1_ && IsIdentity(k)) {
        add(schema::KeyName(k), Identity(k));
      } else {
        add(schema::KeyName(k), Value(k));
      }
    }
    int extra =
        in_->ConsumeIntegralInRange<int>(0, 7) == 0 ? in_->ConsumeIntegralInRange<int>(1, 3) : 0;
    for (int i = 0; i < extra; ++i) {
      Key k = static_cast<Key>(
          in_->ConsumeIntegralInRange<unsigned>(0, static_cast<unsigned>(Key::kCount) - 1));
      add(in_->ConsumeIntegralInRange<int>(0, 7) == 0 ? GenerateName(in_) : schema::KeyName(k),
          Value(k));
    }
    return s + "}";
  }

 private:
  std::string AnyKeyName() {
    return schema::kKeyNames[in_->ConsumeIntegralInRange<unsigned>(
        0, static_cast<unsigned>(Key::kCount) - 1)];
  }

  // The object `member` holds: its keys from the schema's object list.
  std::string Object(Key member) {
    std::string s = "{";
    bool first = true;
#define FORKGUARD_X(M, K)                                                             \
  if (Key::k##M == member && in_->ConsumeIntegralInRange<int>(0, 7) != 0) {           \
    s += (first ? "" : ",") + Quote(schema::kKey##K, false) + ":" + Value(Key::k##K); \
    first = false;                                                                    \
  }
    FORKGUARD_OBJECT_KEYS(FORKGUARD_X)
#undef FORKGUARD_X
    return s + "}";
  }

  // An event's stack: an id of the /2 table, raw addresses, or (/1) frames by value.
  std::string Stack() {
    switch (in_->ConsumeIntegralInRange<int>(0, 3)) {
      case 0:
        return in_->ConsumeBool() ? std::to_string(in_->ConsumeIntegralInRange<int>(-1, 4))
                                  : Number(in_);
      case 1: {
        std::string s = "[";
        int n = in_->ConsumeIntegralInRange<int>(0, 4);
        for (int i = 0; i < n; ++i) s += (i ? "," : "") + Quote(Hex(in_), false);
        return s + "]";
      }
      default: {
        if (!v1_ && in_->ConsumeBool())
          return std::to_string(in_->ConsumeIntegralInRange<int>(0, 4));
        std::string s = "[";
        int n = in_->ConsumeIntegralInRange<int>(0, 4);
        for (int i = 0; i < n; ++i) {
          s += (i ? "," : "") +
               (in_->ConsumeIntegralInRange<int>(0, 3) == 0
                    ? "{\"py\":" + Object(Key::kPy) + "}"
                    : "{\"ip\":" + Value(Key::kIp) + ",\"obj\":" + Value(Key::kObj) +
                          ",\"off\":" + Value(Key::kOff) + ",\"sym\":" + Value(Key::kSym) + "}");
        }
        return s + "]";
      }
    }
  }

  // A stack record's frames: [module, offset] pairs, Python frames after them.
  std::string Frames() {
    std::string s = "[";
    int n = in_->ConsumeIntegralInRange<int>(0, 5);
    for (int i = 0; i < n; ++i) {
      s += i ? "," : "";
      if (in_->ConsumeIntegralInRange<int>(0, 3) == 0) {
        s += "{\"py\":" + Object(Key::kPy) + "}";
      } else {
        s += "[" +
             (in_->ConsumeBool() ? std::to_string(in_->ConsumeIntegralInRange<int>(-2, 3))
                                 : Number(in_)) +
             "," + Number(in_) + "]";
      }
    }
    return s + "]";
  }

  // A /1 line's process identity: one per file, of the schema's types, as the shim wrote it
  // (all lines of a process then fold into one, their forks into one histogram); now and
  // then another value on one line.
  static bool IsIdentity(Key k) {
    return k == Key::kPid || k == Key::kPpid || k == Key::kTid || k == Key::kHost ||
           k == Key::kProg || k == Key::kRank || k == Key::kLocalRank || k == Key::kJob;
  }
  std::string Identity(Key k) {
    std::string& v = identity_[static_cast<size_t>(k)];
    if (v.empty()) v = Typed(k);
    if (in_->ConsumeIntegralInRange<int>(0, 15) == 0) return Value(k);
    return v;
  }

  FuzzedDataProvider* in_;
  bool v1_;
  std::string identity_[static_cast<size_t>(Key::kCount)];
};

std::string FileText(FuzzedDataProvider* in, bool v1, int max_lines) {
  LineWriter w(in, v1);
  std::string text;
  if (!v1 && in->ConsumeIntegralInRange<int>(0, 15) != 0)
    text += w.Record(EventType::kHeader) + "\n";
  int lines = in->ConsumeIntegralInRange<int>(1, max_lines);
  for (int i = 0; i < lines && in->remaining_bytes() > 0; ++i) {
    switch (in->ConsumeIntegralInRange<int>(0, 31)) {
      case 0:  // raw bytes of the input
        text += in->ConsumeRandomLengthString(64) + "\n";
        break;
      case 1:
        text += "\n";
        break;
      case 2:  // another file's header in the middle
        text += w.Record(EventType::kHeader) + "\n";
        break;
      default: {
        // Forks, their stacks and registrations most often: what the analysis bins and groups.
        static constexpr EventType kCommon[] = {EventType::kFork,        EventType::kFork,
                                                EventType::kStackRecord, EventType::kModule,
                                                EventType::kMrRegister,  EventType::kForkChild,
                                                EventType::kRdmaInit,    EventType::kChildSegv};
        EventType t = in->ConsumeBool()
                          ? Pick(in, kCommon)
                          : static_cast<EventType>(in->ConsumeIntegralInRange<unsigned>(
                                0, static_cast<unsigned>(EventType::kCount) - 1));
        text += w.Record(t) + "\n";
      }
    }
  }
  // A torn last line, as a killed writer leaves.
  if (in->ConsumeIntegralInRange<int>(0, 7) == 0 && !text.empty())
    text.resize(in->ConsumeIntegralInRange<size_t>(0, text.size() - 1));
  return text;
}

}  // namespace

std::vector<LogFile> GenerateLogs(FuzzedDataProvider* in, int max_lines) {
  std::vector<LogFile> files;
  int n = in->ConsumeIntegralInRange<int>(1, 3);
  for (int i = 0; i < n && (i == 0 || in->remaining_bytes() > 0); ++i) {
    bool v1 = in->ConsumeBool();
    LogFile f;
    // The shim's name (host, pid, start_ns: the reader reads them), or another one.
    switch (in->ConsumeIntegralInRange<int>(0, 3)) {
      case 0:
        f.name = "fuzz" + std::to_string(i) + ".jsonl";
        break;
      case 1:
        f.name = "forkguard." + GenerateName(in) + "." + Number(in) + "." + Number(in) + ".jsonl";
        break;
      default:
        f.name = "forkguard.h" + std::to_string(i % 2 + 1) + "." + std::to_string(100 + i) + "." +
                 std::to_string(1764500000000000000LL + i) + ".jsonl";
    }
    f.text = FileText(in, v1, max_lines);
    files.push_back(std::move(f));
  }
  return files;
}

std::string GenerateSuppressions(FuzzedDataProvider* in, int max_lines) {
  static constexpr const char* kKinds[] = {
      "child-segv", "parent-corruption",         "inherited-rdma",
      "*",          "child-segv,inherited-rdma", "bogus",
      "",           "child-segv,child-segv"};
  static constexpr const char* kFrameKinds[] = {"func:", "lib:", "file:", "sym:", ""};
  static constexpr const char* kRanks[] = {"0",
                                           "0-3",
                                           "3-0",
                                           "1,2,3",
                                           "9223372036854775807",
                                           "9223372036854775808",
                                           "-1",
                                           "0-9223372036854775807",
                                           "1,2,3,4,5,6,7,8,9",
                                           "",
                                           "x"};
  std::string text;
  int lines = in->ConsumeIntegralInRange<int>(0, max_lines);
  for (int i = 0; i < lines && in->remaining_bytes() > 0; ++i) {
    switch (in->ConsumeIntegralInRange<int>(0, 15)) {
      case 0:
        text += "# " + GenerateName(in) + "\n";
        continue;
      case 1:
        text += in->ConsumeRandomLengthString(300) + "\n";
        continue;
      case 2:
        text += "\n";
        continue;
      default:
        break;
    }
    // A value: plain, double-quoted (with escapes), or a hostile name.
    auto value = [&](std::string v) {
      switch (in->ConsumeIntegralInRange<int>(0, 5)) {
        case 0: {
          std::string q = "\"";
          for (char c : v) {
            if (c == '"' || c == '\\') q += '\\';
            q += c;
          }
          return in->ConsumeIntegralInRange<int>(0, 7) == 0 ? q : q + "\"";
        }
        case 1:
          return GenerateName(in);
        default:
          return v;
      }
    };
    std::string line;
    int keys = in->ConsumeIntegralInRange<int>(1, 7);
    for (int k = 0; k < keys; ++k) {
      if (!line.empty()) line += in->ConsumeIntegralInRange<int>(0, 7) == 0 ? "\t" : " ";
      switch (in->ConsumeIntegralInRange<int>(0, 5)) {
        case 0:
          line += "kind=" + value(Pick(in, kKinds));
          break;
        case 1:
        case 2: {
          std::string pattern = Pick(in, kWords);
          if (in->ConsumeBool()) pattern += "*";
          if (in->ConsumeIntegralInRange<int>(0, 3) == 0) pattern = GenerateName(in);
          std::string frame = Pick(in, kFrameKinds) + pattern;
          if (in->ConsumeIntegralInRange<int>(0, 3) == 0) frame += ":" + Number(in);
          line += "frame=" + value(frame);
          break;
        }
        case 3:
          line += "program=" + value(in->ConsumeBool() ? "trainer" : GenerateName(in));
          break;
        case 4:
          line += "rank=" + value(Pick(in, kRanks));
          break;
        default:
          line += GenerateName(in) + "=" + value(GenerateName(in));
      }
    }
    text += line + "\n";
  }
  return text;
}

}  // namespace forkguard::cli::fuzz
