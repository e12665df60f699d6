#include "cli/event_log.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <thread>
#include <tuple>
#include <unordered_map>

namespace forkguard::cli {
namespace {

// Longest line the reader accepts; the shim writes lines of a few KiB.
constexpr size_t kMaxLineBytes = 1 << 20;
// Files stream through a buffer of this many bytes (plus the longest line).
constexpr size_t kChunkBytes = size_t{1} << 20;
// Event types counted in a ProcessSummary (the rest count as "other").
constexpr size_t kMaxCountedTypes = 32;
// Per file and kind of problem, this many notes name their line; the rest are counted.
constexpr int kNotesPerKind = 3;

using WithLogs = std::set<std::pair<std::string, int64_t>>;

// (host, pid) from a name the shim gives a log, "DIR/forkguard.HOST.PID.START_NS.jsonl"
// (HOST may hold dots); nullopt for any other name.
std::optional<std::pair<std::string, int64_t>> ShimFileIdentity(std::string_view path) {
  size_t slash = path.rfind('/');
  std::string_view n = slash == std::string_view::npos ? path : path.substr(slash + 1);
  constexpr std::string_view kPrefix = "forkguard.", kSuffix = ".jsonl";
  if (n.size() <= kPrefix.size() + kSuffix.size() || n.substr(0, kPrefix.size()) != kPrefix ||
      n.substr(n.size() - kSuffix.size()) != kSuffix)
    return std::nullopt;
  n = n.substr(kPrefix.size(), n.size() - kPrefix.size() - kSuffix.size());
  size_t dot2 = n.rfind('.');
  if (dot2 == std::string_view::npos || dot2 == 0) return std::nullopt;
  size_t dot1 = n.rfind('.', dot2 - 1);
  if (dot1 == std::string_view::npos || dot1 == 0) return std::nullopt;
  auto digits = [](std::string_view d) {
    return !d.empty() && d.size() <= 19 && d.find_first_not_of("0123456789") == d.npos;
  };
  std::string_view pid_text = n.substr(dot1 + 1, dot2 - dot1 - 1);
  if (!digits(pid_text) || !digits(n.substr(dot2 + 1))) return std::nullopt;
  // A name is as hostile as a line: a pid the kernel cannot give is no shim's name.
  int64_t pid = 0;
  auto [end, ec] = std::from_chars(pid_text.data(), pid_text.data() + pid_text.size(), pid);
  if (ec != std::errc() || end != pid_text.data() + pid_text.size() || pid <= 0 ||
      pid > limits::kMaxPid)
    return std::nullopt;
  return std::make_pair(std::string(n.substr(0, dot1)), pid);
}

// Collects notes for one file, naming the first few lines of each kind of
// problem and counting the rest, so a file of junk gives a short report.
class FileNotes {
 public:
  FileNotes(std::string_view file, LogSet* out) : file_(file), out_(out) {}
  ~FileNotes() {
    for (const auto& [kind, n] : extra_)
      if (n > 0)
        out_->notes.push_back({file_, "… and " + std::to_string(n) + " more line(s): " + kind});
  }
  void Add(int line, const std::string& kind, const std::string& detail) {
    ++out_->lines_skipped;
    Note(line, kind, detail);
  }
  // A problem in a line that is still read (a value read as absent).
  void Note(int line, const std::string& kind, const std::string& detail) {
    int& seen = seen_[kind];
    if (seen++ < kNotesPerKind) {
      out_->notes.push_back(
          {file_ + ":" + std::to_string(line), kind + (detail.empty() ? "" : ": " + detail)});
    } else {
      ++extra_[kind];
    }
  }

 private:
  std::string file_;
  LogSet* out_;
  std::map<std::string, int> seen_;
  std::map<std::string, int> extra_;
};

bool LooksBinary(std::string_view line) { return memchr(line.data(), '\0', line.size()); }

// "forkguard.event/1" or "forkguard.event/1.3" -> 1; -1 when not ours.
int SchemaMajor(const std::string& schema) {
  constexpr std::string_view kPrefix = "forkguard.event/";
  if (schema.compare(0, kPrefix.size(), kPrefix) != 0) return -1;
  int major = 0;
  size_t i = kPrefix.size();
  if (i >= schema.size()) return -1;
  for (; i < schema.size() && schema[i] != '.'; ++i) {
    if (schema[i] < '0' || schema[i] > '9' || major > 100000) return -1;
    major = major * 10 + (schema[i] - '0');
  }
  return major;
}

using simdjson::dom::element;
using simdjson::dom::element_type;
using simdjson::dom::object;

using schema::EventType;
using schema::Key;

// A name of a fixed list (formats/event_schema.h) -> its index, N when it is none of them: a
// hash table built at compile time (linear probing; one or two comparisons for a name
// that is in the list).
template <size_t N, size_t kSlots>
class NameIndex {
 public:
  static_assert(N < 255 && kSlots >= 2 * N && (kSlots & (kSlots - 1)) == 0);
  constexpr explicit NameIndex(const char* const (&names)[N]) {
    for (auto& s : slot_) s = kEmpty;
    for (size_t i = 0; i < N; ++i) {
      std::string_view n = names[i];
      names_[i] = n;
      size_t h = Hash(n);
      while (slot_[h] != kEmpty) h = (h + 1) & (kSlots - 1);
      slot_[h] = static_cast<uint8_t>(i);
    }
  }
  [[gnu::always_inline]] constexpr size_t Find(std::string_view k) const {
    if (k.empty()) return N;
    for (size_t h = Hash(k);; h = (h + 1) & (kSlots - 1)) {
      uint8_t i = slot_[h];
      if (i == kEmpty) return N;
      if (names_[i] == k) return i;
    }
  }

 private:
  static constexpr uint8_t kEmpty = 0xff;
  static constexpr size_t Hash(std::string_view k) {
    return (k.size() * 31 + static_cast<unsigned char>(k[0]) * 7 +
            static_cast<unsigned char>(k[k.size() / 2]) * 3 +
            static_cast<unsigned char>(k.back())) &
           (kSlots - 1);
  }
  std::string_view names_[N] = {};
  uint8_t slot_[kSlots] = {};
};

constexpr size_t kKeys = static_cast<size_t>(Key::kCount);
constexpr size_t kEventTypes = static_cast<size_t>(EventType::kCount);
constexpr NameIndex<kKeys, 256> kKeyIndex(schema::kKeyNames);
constexpr NameIndex<kEventTypes, 64> kEventTypeIndex(schema::kEventTypeNames);

// A member's Key; Key::kCount for a name that is not one.
[[gnu::always_inline]] constexpr Key KeyOf(std::string_view k) {
  return static_cast<Key>(kKeyIndex.Find(k));
}
// A record's type; EventType::kCount for a type this forkguard does not know.
constexpr EventType EventTypeOf(std::string_view t) {
  return static_cast<EventType>(kEventTypeIndex.Find(t));
}
static_assert(KeyOf(schema::kKeyVerdict) == Key::kVerdict && KeyOf("tx") == Key::kCount &&
              KeyOf("") == Key::kCount && KeyOf(schema::kKeyN) == Key::kN);
static_assert(EventTypeOf(schema::kFork) == EventType::kFork &&
              EventTypeOf(schema::kNote) == EventType::kNote &&
              EventTypeOf("forks") == EventType::kCount);

// An object's members by Key: the first member of each name, as object::at_key finds it,
// found in one pass over the object (a lookup by name would scan the object once per field
// asked for).
struct Fields {
  object o;
  uint64_t have[(kKeys + 63) / 64] = {};
  union Slot {
    Slot() {}  // not zeroed: a slot is read only once `have` says it was written
    element e;
  } at[kKeys];
  explicit Fields(object obj) : o(obj) {
    for (auto field : o) {
      auto k = static_cast<size_t>(KeyOf(field.key));
      if (k == kKeys) continue;
      uint64_t bit = uint64_t{1} << (k % 64);
      if (have[k / 64] & bit) continue;
      have[k / 64] |= bit;
      at[k].e = field.value;
    }
  }
};

// Tolerant typed lookups, as json.h's Get* (first member of that name), in an object or
// in the Fields of one.
bool Member(object o, Key key, element* out) {
  return o.at_key(schema::KeyName(key)).get(*out) == simdjson::SUCCESS;
}
[[gnu::always_inline]] inline bool Member(const Fields& f, Key key, element* out) {
  auto k = static_cast<size_t>(key);
  if (!(f.have[k / 64] & (uint64_t{1} << (k % 64)))) return false;
  *out = f.at[k].e;
  return true;
}
// The string member `key`, or `fallback` when absent or not a string (a view into the
// parsed line: valid until the next line is parsed).
template <typename O>
[[gnu::always_inline]] inline std::string_view StrView(const O& o, Key key,
                                                       std::string_view fallback = "") {
  element e;
  std::string_view v;
  if (Member(o, key, &e) && e.get_string().get(v) == simdjson::SUCCESS) return v;
  return fallback;
}
template <typename O>
[[gnu::always_inline]] inline std::string Str(const O& o, Key key, std::string_view fallback = "") {
  return std::string(StrView(o, key, fallback));
}
std::optional<int64_t> IntOf(element e) {
  switch (e.type()) {
    case element_type::INT64:
      return e.get_int64().value_unsafe();
    case element_type::UINT64:
    case element_type::DOUBLE: {
      double d = 0;
      if (e.get_double().get(d) != simdjson::SUCCESS) return std::nullopt;
      if (d > -9.2e18 && d < 9.2e18) return static_cast<int64_t>(d);
      return std::nullopt;
    }
    default:
      return std::nullopt;
  }
}
template <typename O>
[[gnu::always_inline]] inline int64_t Int(const O& o, Key key, int64_t fallback) {
  element e;
  if (!Member(o, key, &e)) return fallback;
  return IntOf(e).value_or(fallback);
}
template <typename O>
[[gnu::always_inline]] inline bool Bool(const O& o, Key key, bool fallback) {
  element e;
  bool b = false;
  if (Member(o, key, &e) && e.get_bool().get(b) == simdjson::SUCCESS) return b;
  return fallback;
}
std::optional<uint64_t> Address(element e) {
  if (e.type() == element_type::INT64) {
    int64_t v = e.get_int64().value_unsafe();
    if (v >= 0) return static_cast<uint64_t>(v);
    return std::nullopt;
  }
  std::string_view s;
  if (e.get_string().get(s) == simdjson::SUCCESS) return ParseAddressText(s);
  return std::nullopt;
}
template <typename O>
[[gnu::always_inline]] inline std::optional<uint64_t> AddressAt(const O& o, Key key) {
  element e;
  if (!Member(o, key, &e)) return std::nullopt;
  return Address(e);
}

// A stack from its JSON array (tolerant: bad frames are skipped).
Stack DecodeStack(element v) {
  Stack out;
  simdjson::dom::array arr;
  if (v.get_array().get(arr) != simdjson::SUCCESS) return out;
  for (element f : arr) {
    Frame fr;
    object fo;
    if (f.get_object().get(fo) == simdjson::SUCCESS) {
      element py;
      object po;
      if (Member(fo, Key::kPy, &py) && py.get_object().get(po) == simdjson::SUCCESS) {
        fr.python = true;
        fr.py_file = Str(po, Key::kFile);
        fr.py_line = Int(po, Key::kLine, 0);
        fr.py_func = Str(po, Key::kFunc);
      } else {
        fr.ip = AddressAt(fo, Key::kIp).value_or(0);
        fr.obj = Str(fo, Key::kObj);
        fr.off = AddressAt(fo, Key::kOff);
        fr.sym = Str(fo, Key::kSym);
        fr.symoff = Str(fo, Key::kSymoff);
      }
    } else if (auto ip = Address(f)) {
      fr.ip = *ip;  // raw ips (child_segv reg_stack)
    } else {
      continue;
    }
    out.push_back(std::move(fr));
    if (out.size() >= 256) break;
  }
  return out;
}

// Identity of a decoded stack within a process (every field that renders).
std::string StackIdentity(const Stack& s) {
  std::string k;
  for (const Frame& f : s) {
    if (f.python) {
      k += "p" + f.py_file + '\x1f' + std::to_string(f.py_line) + '\x1f' + f.py_func;
    } else {
      k += "n" + std::to_string(f.ip) + '\x1f' + f.obj + '\x1f' +
           (f.off ? std::to_string(*f.off) : "-") + '\x1f' + f.sym + '\x1f' + f.symoff;
    }
    k += '\x1e';
  }
  return k;
}

// A forkguard.event/2 file as its lines are read: the header's process, its module map and
// its stack records (from one header to the next: a file may hold concatenated logs). The
// one decoder of /2: the report folds what it yields into processes (ParseLogText,
// ReadLogs), DecodeEventRecords writes it out as self-contained events.
struct V2Decoder {
  struct Module {
    std::string path;
    std::string build_id;
    uint64_t base = 0;
  };
  bool on = false;  // a header was read: lines without "schema" are its process's
  int64_t pid = -1;
  int64_t start_ns = 0;
  std::unordered_map<int64_t, Module> modules;
  // Stack records as their frames' JSON, decoded when an event names them (most are
  // registration stacks, which no event the report keeps uses).
  std::unordered_map<int64_t, std::string> raw_stacks;
  // Stack records that named a module not met (yet): decoded at their line, as the note
  // about it is about that line.
  std::unordered_map<int64_t, Stack> early_stacks;

  bool HasStack(int64_t id) const { return raw_stacks.count(id) || early_stacks.count(id); }

  // A header of process `header_pid`: the tables start empty.
  void Start(int64_t header_pid, int64_t header_start_ns) {
    on = true;
    pid = header_pid;
    start_ns = header_start_ns;
    modules.clear();
    raw_stacks.clear();
    early_stacks.clear();
  }

  // A module or stack record (`kind`): kept (true, *id set), or skipped with a note.
  bool Record(const Fields& v, EventType kind, std::string_view type, int lineno, FileNotes* notes,
              int64_t* id_out) {
    element ie;
    std::optional<int64_t> id;
    if (Member(v, Key::kId, &ie)) id = IntOf(ie);
    if (!id || *id < 0) {
      notes->Add(lineno, "a " + std::string(type) + " record without a valid id, skipped", "");
      return false;
    }
    *id_out = *id;
    if (kind == EventType::kModule) {
      if (modules.count(*id)) {
        notes->Add(lineno, "duplicate module id", std::to_string(*id) + " (the first kept)");
        return false;
      }
      modules[*id] = {Str(v, Key::kPath), Str(v, Key::kBuildId),
                      AddressAt(v, Key::kBase).value_or(0)};
      return true;
    }
    if (HasStack(*id)) {
      notes->Add(lineno, "duplicate stack id", std::to_string(*id) + " (the first kept)");
      return false;
    }
    element fe;
    if (!Member(v, Key::kFrames, &fe)) {
      notes->Add(lineno, "a stack record without frames, skipped", std::to_string(*id));
      return false;
    }
    bool modules_known = true;
    simdjson::dom::array frames;
    if (fe.get_array().get(frames) == simdjson::SUCCESS) {
      for (element f : frames) {
        simdjson::dom::array pair;
        element me;
        if (f.get_array().get(pair) == simdjson::SUCCESS &&
            pair.at(0).get(me) == simdjson::SUCCESS) {
          int64_t m = IntOf(me).value_or(-1);
          if (m >= 0 && !modules.count(m)) modules_known = false;
        }
      }
    }
    if (modules_known)
      raw_stacks[*id] = simdjson::minify(fe);
    else
      early_stacks[*id] = DecodeFrames(fe, *id, lineno, notes);
    return true;
  }

  // The frames of stack record `id`; nullopt when there is none of that id (or its frames
  // are not JSON).
  std::optional<Stack> Frames(int64_t id, int lineno, FileNotes* notes) const {
    if (auto early = early_stacks.find(id); early != early_stacks.end()) return early->second;
    auto raw = raw_stacks.find(id);
    if (raw == raw_stacks.end()) return std::nullopt;
    // A parser of its own: the line being decoded lives in LineParser()'s document.
    thread_local simdjson::dom::parser parser;
    element fe;
    if (parser.parse(raw->second).get(fe) != simdjson::SUCCESS) return std::nullopt;
    return DecodeFrames(fe, id, lineno, notes);
  }

  // A stack record's frames: [module, off] pairs (module -1: off is a raw address) and
  // Python frames; a module id not (yet) met gets a note and raw offsets.
  Stack DecodeFrames(element v, int64_t id, int lineno, FileNotes* notes) const {
    Stack out;
    simdjson::dom::array arr;
    if (v.get_array().get(arr) != simdjson::SUCCESS) return out;
    bool noted = false;
    for (element f : arr) {
      Frame fr;
      simdjson::dom::array pair;
      object fo;
      if (f.get_array().get(pair) == simdjson::SUCCESS) {
        element me, oe;
        if (pair.at(0).get(me) != simdjson::SUCCESS || pair.at(1).get(oe) != simdjson::SUCCESS)
          continue;
        int64_t m = IntOf(me).value_or(-1);
        std::optional<uint64_t> off = Address(oe);
        if (!off) continue;
        if (m < 0) {
          fr.ip = *off;
        } else if (auto it = modules.find(m); it != modules.end()) {
          fr.obj = it->second.path;
          fr.build_id = it->second.build_id;
          fr.base = it->second.base;
          fr.off = off;
        } else {
          if (!noted)
            notes->Add(lineno, "module used before or without its record",
                       "stack " + std::to_string(id) + " uses module " + std::to_string(m) +
                           " (its offsets stay raw)");
          noted = true;
          fr.ip = *off;
        }
      } else if (f.get_object().get(fo) == simdjson::SUCCESS) {
        element py;
        object po;
        if (!Member(fo, Key::kPy, &py) || py.get_object().get(po) != simdjson::SUCCESS) continue;
        fr.python = true;
        fr.py_file = Str(po, Key::kFile);
        fr.py_line = Int(po, Key::kLine, 0);
        fr.py_func = Str(po, Key::kFunc);
      } else {
        continue;
      }
      out.push_back(std::move(fr));
      if (out.size() >= 256) break;
    }
    return out;
  }
};

// The per-file state: processes met in this file and their stack tables.
struct FileState {
  struct Proc {
    size_t index = 0;  // into out->processes
    std::unordered_map<std::string, int> stack_ids;
    // Forks: the site of each (verdict, site hash or stack), the forks still without a
    // fork_child line (newest last, at most kMaxPending), the newest samples (a ring).
    struct Pending {
      int site;
      int64_t ts_ns;
      int64_t ordinal;
    };
    std::unordered_map<std::string, int> site_ids;
    std::vector<Pending> pending;
    std::vector<ForkSample> tail;
    size_t tail_next = 0;
  };
  std::map<std::pair<std::string, int64_t>, Proc> by_proc;
  std::map<std::pair<std::string, int64_t>, Proc>::iterator last = by_proc.end();
  // forkguard.event/2: the file's decoder (header, modules, stack records), the header's
  // process, and the index in ProcessLog::stacks of each stack record an event used (-1:
  // its frames did not decode).
  V2Decoder v2;
  std::map<std::pair<std::string, int64_t>, Proc>::iterator v2_proc = by_proc.end();
  std::unordered_map<int64_t, int> v2_stack_index;
  // Where the line being decoded is (for the notes of stack references).
  FileNotes* notes = nullptr;
  int lineno = 0;
  // (host, pid) of every process with a log of its own; null: unknown, keep every child.
  const std::set<std::pair<std::string, int64_t>>* with_logs = nullptr;
  // Storage reused from fork line to fork line (forks are tallied, not kept).
  Event fork_event;
  std::string site_key;
};

// A fork_child line waits for the newest fork of its process without a child; this many
// forks without one are remembered (failed forks never get one), the oldest dropped.
constexpr size_t kMaxPending = 256;
constexpr size_t kMaxErrnos = 16;

// Folds the fork event `e` of process `p` into its site and its sample.
void TallyFork(const Event& e, FileState* state, FileState::Proc* proc, ProcessLog* p) {
  std::string& key = state->site_key;  // reused: no allocation for a site already met
  key.assign(e.verdict).append(1, '\x1f').append(e.site).append(1, '\x1f');
  if (e.site.empty()) key.append(std::to_string(e.stack));
  key.append(1, '\x1f').append(e.suppressed);
  auto it = proc->site_ids.find(key);
  if (it == proc->site_ids.end()) {
    it = proc->site_ids.emplace(key, static_cast<int>(p->fork_sites.size())).first;
    ForkSite fs;
    fs.verdict = e.verdict;
    fs.site = e.site;
    fs.stack = e.stack;
    fs.suppressed = e.suppressed;
    fs.first_ts_ns = e.ts_ns;
    p->fork_sites.push_back(std::move(fs));
  }
  ForkSite& s = p->fork_sites[static_cast<size_t>(it->second)];
  // A hazard the shim suppressed counts as such in the site (ApplySuppressions moves the
  // site to "suppressed"), not in the timeline's hazard bins.
  bool hazard = e.verdict == "hazard";
  ++s.count;
  if (hazard) ++s.hazard;
  s.first_ts_ns = std::min(s.first_ts_ns, e.ts_ns);
  s.last_ts_ns = std::max(s.last_ts_ns, e.ts_ns);
  for (const auto& r : e.reasons) ++s.reasons[r];
  ++s.actions[e.action];
  if (!e.via.empty()) ++s.via[e.via];
  if (s.fix.empty() && !e.fix.empty()) {
    s.fix = e.fix;
    s.fix_library = e.fix_library;
  }
  s.fix_tally.Take(e.fix_tally);
  if (e.action == "failed" && !e.errno_text.empty() && s.errnos.size() < kMaxErrnos &&
      std::find(s.errnos.begin(), s.errnos.end(), e.errno_text) == s.errnos.end())
    s.errnos.push_back(e.errno_text);
  if (e.has_init) {
    if (e.init_age_ms >= 0) {
      s.min_age_ms = s.min_age_ms < 0 ? e.init_age_ms : std::min(s.min_age_ms, e.init_age_ms);
      s.max_age_ms = std::max(s.max_age_ms, e.init_age_ms);
    }
    if (!s.has_init) {
      s.has_init = true;
      s.init_call = e.init_call;
      s.init_device = e.init_device;
      s.init_stack = e.init_stack;
    }
  }
  s.Take(e.ranges, e.range_bytes, e.dontfork_ranges, e.threads, e.kernel_cof);

  int64_t ordinal = p->forks++;
  if (p->first_fork_ns == 0 || (e.ts_ns > 0 && e.ts_ns < p->first_fork_ns))
    p->first_fork_ns = e.ts_ns;
  p->last_fork_ns = std::max(p->last_fork_ns, e.ts_ns);
  p->fork_bins.Add(e.ts_ns, hazard && e.suppressed.empty());
  // The first forks join the sample; the newest wait in a ring (its slots reused).
  ForkSample* f;
  if (p->fork_sample.size() < ProcessLog::kForkSampleHead) {
    f = &p->fork_sample.emplace_back();
  } else if (proc->tail.size() < ProcessLog::kForkSampleTail) {
    f = &proc->tail.emplace_back();
  } else {
    f = &proc->tail[proc->tail_next];
    proc->tail_next = (proc->tail_next + 1) % ProcessLog::kForkSampleTail;
  }
  f->ts_ns = e.ts_ns;
  f->tid = e.tid;
  f->line = e.line;
  f->site = it->second;
  f->ordinal = ordinal;
  f->action.assign(e.action);
  f->reasons.assign(e.reasons.begin(), e.reasons.end());
  f->child_pid = -1;
  if (proc->pending.size() >= kMaxPending) proc->pending.erase(proc->pending.begin());
  proc->pending.push_back({it->second, e.ts_ns, ordinal});
}

// A fork_child line: the child of the newest fork of this process without one.
void TallyForkChild(int64_t child_pid, const FileState& state, FileState::Proc* proc,
                    ProcessLog* p) {
  ++p->fork_children;
  if (proc->pending.empty()) return;
  FileState::Proc::Pending f = proc->pending.back();
  proc->pending.pop_back();
  ++p->fork_sites[static_cast<size_t>(f.site)].children;
  if (static_cast<size_t>(f.ordinal) < p->fork_sample.size()) {
    p->fork_sample[static_cast<size_t>(f.ordinal)].child_pid = child_pid;
  } else {
    for (ForkSample& s : proc->tail)
      if (s.ordinal == f.ordinal) s.child_pid = child_pid;
  }
  if (child_pid > 0 && (state.with_logs == nullptr || state.with_logs->count({p->host, child_pid})))
    p->child_links.push_back({child_pid, f.site, f.ts_ns});
}

// The end of a file: each process's newest forks join its sample, in log order.
void FinishFile(FileState* state, LogSet* out) {
  for (auto& [key, proc] : state->by_proc) {
    ProcessLog& p = out->processes[proc.index];
    std::rotate(proc.tail.begin(), proc.tail.begin() + static_cast<std::ptrdiff_t>(proc.tail_next),
                proc.tail.end());
    for (ForkSample& f : proc.tail) p.fork_sample.push_back(std::move(f));
    proc.tail.clear();
    proc.tail_next = 0;
    proc.pending.clear();
  }
}

int InternDecoded(Stack st, FileState::Proc* proc, ProcessLog* p) {
  std::string key = StackIdentity(st);
  auto [it, fresh] = proc->stack_ids.emplace(std::move(key), static_cast<int>(p->stacks.size()));
  if (fresh) p->stacks.push_back(std::move(st));
  return it->second;
}
int InternStack(element v, FileState::Proc* proc, ProcessLog* p) {
  return InternDecoded(DecodeStack(v), proc, p);
}

// The index of /2 stack record `id` in p->stacks, decoding it on first use; -1 when unknown.
int V2Stack(int64_t id, FileState* state, FileState::Proc* proc, ProcessLog* p) {
  auto it = state->v2_stack_index.find(id);
  if (it != state->v2_stack_index.end()) return it->second;
  if (!state->v2.HasStack(id)) return -1;
  std::optional<Stack> frames = state->v2.Frames(id, state->lineno, state->notes);
  int index = frames ? InternDecoded(std::move(*frames), proc, p) : -1;
  state->v2_stack_index[id] = index;
  return index;
}

// A stack value: an array (inline frames, /1 and /2) or, in /2, the id of a stack record.
template <typename O>
int StackAt(const O& o, Key key, FileState::Proc* proc, ProcessLog* p, FileState* state = nullptr) {
  element e;
  if (!Member(o, key, &e)) return -1;
  if (state != nullptr && state->v2.on &&
      (e.type() == element_type::INT64 || e.type() == element_type::UINT64)) {
    int64_t id = IntOf(e).value_or(-1);
    if (state->v2.HasStack(id)) return V2Stack(id, state, proc, p);
    state->notes->Add(state->lineno, "stack id used before or without its record",
                      "stack " + std::to_string(id) + " (the event is kept without it)");
    return -1;
  }
  return InternStack(e, proc, p);
}

// Events that only count: one per registration or verbs call, millions in a
// job, and nothing in the report reads their fields. (mr_deregister: one per
// deregistration in older files; the shim now writes it only for MRs it did
// not see registered. mr_counts: the registrations at sites already logged, and
// the tracked deregistrations, counted.)
bool CountOnly(EventType type) {
  switch (type) {
    case EventType::kMrRegister:
    case EventType::kMrDeregister:
    case EventType::kRdmaCall:
    case EventType::kForkInit:
    case EventType::kMrCounts:
      return true;
    default:
      return false;
  }
}

// The strings of array member `key`, up to `max` of them in all, appended to `out`.
void Strings(const Fields& o, Key key, size_t max, std::vector<std::string>* out) {
  element x;
  simdjson::dom::array a;
  if (!Member(o, key, &x) || x.get_array().get(a) != simdjson::SUCCESS) return;
  for (element s : a) {
    std::string_view v;
    if (s.get_string().get(v) == simdjson::SUCCESS && out->size() < max) out->emplace_back(v);
  }
}

// A fork range's `fixed` value `v` (fix mode's change to it) into the fork's tally: "copied"
// and "withheld" count for a fork whose action is "fixed" (`fix->forks` 1; another fork's
// child got no such change), "failed" for any fork. Any other value is read as unchanged,
// with one note per line (*noted).
void TallyFixedRange(element v, std::string_view kind, int64_t len, FixTally* fix, FileState* state,
                     bool* noted) {
  std::string_view s;
  bool is_string = v.get_string().get(s) == simdjson::SUCCESS;
  if (is_string && s == "failed") {
    fix->failed_ranges = SatAdd(fix->failed_ranges, 1);
    return;
  }
  bool copied = is_string && s == "copied", withheld = is_string && s == "withheld";
  if (!copied && !withheld) {
    if (!*noted && state != nullptr && state->notes != nullptr) {
      // At most 64 bytes of it, cut where a UTF-8 character starts.
      std::string shown = is_string ? std::string(s) : simdjson::minify(v);
      if (shown.size() > 64) {
        size_t cut = 64;
        while (cut > 0 && (static_cast<unsigned char>(shown[cut]) & 0xc0) == 0x80) --cut;
        shown = shown.substr(0, cut) + "…";
      }
      if (is_string) shown = JsonQuote(shown);
      state->notes->Note(state->lineno,
                         "a fork range's \"fixed\" is not copied, withheld or failed (read "
                         "as unchanged)",
                         shown);
    }
    *noted = true;
    return;
  }
  if (fix->forks == 0) return;
  size_t k = 0;
  while (k + 1 < std::size(FixTally::kKinds) && kind != FixTally::kKinds[k]) ++k;
  if (copied) {
    fix->copied_ranges = SatAdd(fix->copied_ranges, 1);
    fix->copied_bytes = SatAdd(fix->copied_bytes, len);
    fix->copied_kinds |= 1u << k;
  } else {
    fix->withheld_ranges = SatAdd(fix->withheld_ranges, 1);
    fix->withheld_bytes = SatAdd(fix->withheld_bytes, len);
    fix->withheld_kinds |= 1u << k;
  }
}

// The typed fields of `e.type` from `o`.
void DecodeEvent(const Fields& o, FileState::Proc* proc, ProcessLog* p, Event* e,
                 FileState* state) {
  element x;
  switch (e->kind) {
    case EventType::kProcessStart: {
      e->exe = Str(o, Key::kExe);
      e->mode = Str(o, Key::kMode);
      Strings(o, Key::kArgv, 64, &e->argv);
      break;
    }
    case EventType::kProcessExit: {
      if (Member(o, Key::kStatus, &x) && x.type() == element_type::INT64)
        e->status = x.get_int64().value_unsafe();
      break;
    }
    case EventType::kRdmaInit: {
      e->call = Str(o, Key::kCall, "?");
      e->device = Str(o, Key::kDevice);
      e->stack = StackAt(o, Key::kStack, proc, p, state);
      break;
    }
    case EventType::kFork: {
      e->verdict = Str(o, Key::kVerdict, "unknown");
      e->site = Str(o, Key::kSite);
      e->action = Str(o, Key::kAction, "unknown");
      e->via = Str(o, Key::kVia);
      e->fix = Str(o, Key::kFix);
      e->suppressed = Str(o, Key::kSuppressed);
      e->fix_library = Str(o, Key::kHeldBy);
      object fs;
      if (e->fix_library.empty() && Member(o, Key::kForkSupport, &x) &&
          x.get_object().get(fs) == simdjson::SUCCESS)
        e->fix_library = Str(fs, Key::kBy);
      e->stack = StackAt(o, Key::kStack, proc, p, state);
      Strings(o, Key::kReasons, 16, &e->reasons);
      if (e->action == "failed" && Member(o, Key::kErrno, &x)) {
        std::string_view v;
        if (x.type() == element_type::INT64)
          e->errno_text = std::to_string(x.get_int64().value_unsafe());
        else if (x.get_string().get(v) == simdjson::SUCCESS)
          e->errno_text = std::string(v);
      }
      object init;
      if (Member(o, Key::kInit, &x) && x.get_object().get(init) == simdjson::SUCCESS) {
        e->has_init = true;
        e->init_age_ms = std::clamp<int64_t>(Int(init, Key::kAgeMs, -1), -1, limits::kMaxTsNs);
        e->init_call = Str(init, Key::kCall, "?");
        e->init_device = Str(init, Key::kDevice);
        e->init_stack = StackAt(init, Key::kStack, proc, p, state);
      }
      simdjson::dom::array a;
      FixTally& fix = e->fix_tally;
      fix.forks = e->action == "fixed" ? 1 : 0;
      bool fix_noted = false;
      if (Member(o, Key::kRanges, &x) && x.get_array().get(a) == simdjson::SUCCESS) {
        for (element r : a) {
          object ro;
          if (r.get_object().get(ro) != simdjson::SUCCESS) continue;
          ++e->ranges;
          int64_t len = std::clamp<int64_t>(Int(ro, Key::kLen, 0), 0, limits::kMaxBytes);
          e->range_bytes = SatAdd(e->range_bytes, len);
          if (Bool(ro, Key::kDontfork, false)) ++e->dontfork_ranges;
          element fe;
          if (Member(ro, Key::kFixed, &fe))
            TallyFixedRange(fe, StrView(ro, Key::kKind), len, &fix, state, &fix_noted);
        }
      }
      e->threads = Int(o, Key::kThreads, 0);
      bool cof = false;
      if (Member(o, Key::kKernelCof, &x) && x.get_bool().get(cof) == simdjson::SUCCESS)
        e->kernel_cof = cof;
      break;
    }
    case EventType::kForkChild: {
      e->child_pid = Int(o, Key::kChildPid, -1);
      break;
    }
    case EventType::kSpawn: {
      e->call = Str(o, Key::kCall);
      e->child_pid = Int(o, Key::kChildPid, -1);
      break;
    }
    case EventType::kChildSegv: {
      e->signal = static_cast<int>(Int(o, Key::kSignal, 11));
      e->addr = AddressAt(o, Key::kAddr);
      object rg;
      if (Member(o, Key::kRange, &x) && x.get_object().get(rg) == simdjson::SUCCESS) {
        e->range_addr = AddressAt(rg, Key::kAddr);
        e->range_len = AddressAt(rg, Key::kLen);
      }
      e->call = Str(o, Key::kCall);
      e->stack = StackAt(o, Key::kRegStack, proc, p, state);
      break;
    }
    case EventType::kChildExec: {
      e->call = Str(o, Key::kPath);
      break;
    }
    case EventType::kNote: {
      e->text = Str(o, Key::kText);
      break;
    }
    case EventType::kUnwatchedExec: {
      e->text = Str(o, Key::kPath);
      e->call = Str(o, Key::kExecBy);
      Strings(o, Key::kWhy, 16, &e->reasons);
      bool held = false;
      if (Member(o, Key::kHeldRdma, &x) && x.get_bool().get(held) == simdjson::SUCCESS)
        e->held_rdma = held;
      break;
    }
    default:  // the rest keep only the common fields
      break;
  }
}

void Count(ProcessSummary* s, std::string_view type) {
  auto it = s->counts.find(type);
  if (it != s->counts.end())
    ++it->second;
  else if (s->counts.size() < kMaxCountedTypes)
    s->counts.emplace(type, 1);
  else
    ++s->counts["other"];
}

using ProcIt = std::map<std::pair<std::string, int64_t>, FileState::Proc>::iterator;

// The process of (host, job, pid), created on first sight.
ProcIt FindProcess(const Fields& v, int64_t pid, FileState* state, std::string_view file_name,
                   LogSet* out) {
  std::string_view host = "?";
  element he;
  if (Member(v, Key::kHost, &he) && he.get_string().get(host) != simdjson::SUCCESS) host = "?";
  // Two jobs' processes on one host may have the same pid: never one process.
  std::string job = Str(v, Key::kJob);
  std::string host_job = std::string(host) + '\x1f' + job;
  // Nearly every line of a file is the same process as the one before.
  auto it = state->last;
  if (it == state->by_proc.end() || it->first.second != pid || it->first.first != host_job)
    it = state->by_proc.find(std::make_pair(host_job, pid));
  if (it == state->by_proc.end()) {
    auto key = std::make_pair(host_job, pid);
    ProcessLog p;
    p.file = std::string(file_name);
    p.host = std::string(host);
    p.pid = pid;
    out->processes.push_back(std::move(p));
    FileState::Proc proc;
    proc.index = out->processes.size() - 1;
    it = state->by_proc.emplace(key, std::move(proc)).first;
  }
  return it;
}

// ppid, prog, rank, local_rank, job: from a /1 line or a /2 header.
void FillIdentity(const Fields& v, ProcessLog* pp) {
  ProcessLog& p = *pp;
  if (p.ppid <= 0) p.ppid = Int(v, Key::kPpid, -1);
  if (p.prog.empty()) p.prog = Str(v, Key::kProg);
  if (!p.rank) {
    element r;
    if (Member(v, Key::kRank, &r) && r.type() == element_type::INT64)
      p.rank = r.get_int64().value_unsafe();
  }
  if (!p.local_rank) {
    element r;
    if (Member(v, Key::kLocalRank, &r) && r.type() == element_type::INT64)
      p.local_rank = r.get_int64().value_unsafe();
  }
  if (p.job.empty()) p.job = Str(v, Key::kJob);
}

// Folds one event of process `it` into the set (both schemas).
void UseEvent(const Fields& v, std::string_view type, EventType kind, int64_t ts, int lineno,
              FileNotes* notes, FileState* state, ProcIt it, LogSet* out) {
  ProcessLog& p = out->processes[it->second.index];
  if (ts > 0 && (p.first_ts_ns == 0 || ts < p.first_ts_ns)) p.first_ts_ns = ts;
  ProcessSummary& sum = p.summary;
  Count(&sum, type);
  ++sum.lines;
  sum.last_ts_ns = std::max(sum.last_ts_ns, ts);
  ++out->lines_used;
  if (CountOnly(kind)) {
    if (kind == EventType::kMrRegister) {
      ++sum.registrations;
      int64_t len = Int(v, Key::kLen, 0);
      element mr;
      simdjson::dom::array a;
      element le;
      // /2: "mr":[addr,len,access,handle]
      if (Member(v, Key::kMr, &mr) && mr.get_array().get(a) == simdjson::SUCCESS &&
          a.at(1).get(le) == simdjson::SUCCESS)
        len = std::clamp<int64_t>(IntOf(le).value_or(0), 0, limits::kMaxBytes);
      sum.registered_bytes = SatAdd(sum.registered_bytes, std::max<int64_t>(0, len));
      if (sum.first_registrations.size() < ProcessSummary::kMaxRegistrationSamples)
        sum.first_registrations.push_back(
            {ts, Int(v, Key::kTid, state->v2.on ? p.pid : 0), std::max<int64_t>(0, len),
             Bool(v, Key::kDontfork, false),
             Str(v, Key::kCall, state->v2.on ? schema::kDefaultRegCall : "")});
    }
    if (kind == EventType::kMrDeregister) ++sum.deregistrations;
    // /2: a registration's stack id must name a record already read (cheap: one lookup).
    auto check_stack = [&](const auto& o) {
      element se;
      if (state->v2.on && Member(o, Key::kStack, &se) && se.type() == element_type::INT64 &&
          !state->v2.HasStack(se.get_int64().value_unsafe()))
        notes->Add(lineno, "stack id used before or without its record",
                   "stack " + std::to_string(se.get_int64().value_unsafe()) +
                       " (the event is counted without it)");
    };
    if (kind == EventType::kMrCounts) {
      // Registrations at sites this process had already logged, counted by the shim since
      // its previous mr_counts line (its own mr_register lines are counted above).
      element sites;
      simdjson::dom::array a;
      if (Member(v, Key::kSites, &sites) && sites.get_array().get(a) == simdjson::SUCCESS) {
        for (element site : a) {
          object so;
          if (site.get_object().get(so) != simdjson::SUCCESS) continue;
          int64_t n = std::clamp<int64_t>(Int(so, Key::kN, 0), 0, limits::kMaxCount);
          sum.registrations = SatAdd(sum.registrations, n);
          sum.counted_registrations = SatAdd(sum.counted_registrations, n);
          sum.registered_bytes =
              SatAdd(sum.registered_bytes,
                     std::clamp<int64_t>(Int(so, Key::kBytes, 0), 0, limits::kMaxBytes));
          check_stack(so);
        }
      }
      sum.deregistrations =
          SatAdd(sum.deregistrations, std::max<int64_t>(0, Int(v, Key::kDeregs, 0)));
      return;
    }
    check_stack(v);
    return;
  }
  // Nothing the process counted after these is lost to a kill: exit and exec write it first.
  if (kind == EventType::kProcessExit || kind == EventType::kChildExec) sum.counts_final = true;
  if (kind == EventType::kRdmaInit && sum.rdma_init_ts_ns == 0) sum.rdma_init_ts_ns = ts;
  if (kind == EventType::kForkChild) {
    TallyForkChild(Int(v, Key::kChildPid, -1), *state, &it->second, &p);
    return;
  }
  // A fork is tallied, not kept: it is decoded into storage reused from fork to fork.
  bool fork = kind == EventType::kFork;
  Event fresh;
  Event& e = fork ? state->fork_event : fresh;
  if (fork) {
    std::vector<std::string> reasons = std::move(e.reasons);
    reasons.clear();
    e = Event();
    e.reasons = std::move(reasons);
  }
  e.type.assign(type);
  e.kind = kind;
  e.ts_ns = ts;
  e.seq = Int(v, Key::kSeq, -1);
  e.tid = Int(v, Key::kTid, state->v2.on ? p.pid : 0);
  e.line = lineno;
  state->notes = notes;
  state->lineno = lineno;
  DecodeEvent(v, &it->second, &p, &e, state);
  if (fork) {
    TallyFork(e, state, &it->second, &p);
    return;
  }
  p.events.push_back(std::move(e));
}

// Folds the lines V2Decoder and ParseLine yield into processes (ParseLogText, ReadLogs).
struct ReportSink {
  FileState* state;
  std::string_view file_name;
  LogSet* out;

  V2Decoder* decoder() { return &state->v2; }

  // A /2 header (`pid` valid): the process every later line of the file belongs to.
  void Header(const Fields& v, std::string_view /*line*/, int64_t pid, int /*lineno*/) {
    auto it = FindProcess(v, pid, state, file_name, out);
    state->last = it;
    FillIdentity(v, &out->processes[it->second.index]);
    state->v2_proc = it;
    state->v2_stack_index.clear();
    ++out->lines_used;
    ++out->processes[it->second.index].summary.lines;
  }

  // A /2 module or stack record the decoder kept.
  void Record(EventType kind, int64_t id) {
    ProcIt it = state->v2_proc;
    ProcessLog& p = out->processes[it->second.index];
    if (kind == EventType::kStackRecord) {
      auto early = state->v2.early_stacks.find(id);
      if (early != state->v2.early_stacks.end())
        state->v2_stack_index[id] = InternDecoded(early->second, &it->second, &p);
    }
    ++out->lines_used;
    ++p.summary.lines;
  }

  // A /1 line of process `pid`.
  void EventV1(const Fields& v, std::string_view /*line*/, std::string_view type, int64_t pid,
               int lineno, FileNotes* notes) {
    auto it = FindProcess(v, pid, state, file_name, out);
    state->last = it;
    FillIdentity(v, &out->processes[it->second.index]);
    UseEvent(v, type, EventTypeOf(type), Int(v, Key::kTsNs, 0), lineno, notes, state, it, out);
  }

  // A /2 event (`ts`: absolute).
  void EventV2(const Fields& v, std::string_view /*line*/, std::string_view type, EventType kind,
               int64_t ts, int lineno, FileNotes* notes) {
    UseEvent(v, type, kind, ts, lineno, notes, state, state->v2_proc, out);
  }
};

// The top-level numbers of a line and their bounds (limits): a line carrying one outside
// them is skipped whole. Numbers inside arrays and objects are clamped where they are read.
struct NumberBound {
  Key key;
  int64_t lo, hi;
};
constexpr NumberBound kNumberBounds[] = {
    {Key::kPpid, 0, limits::kMaxPid},
    {Key::kTid, 0, limits::kMaxPid},
    {Key::kChildPid, -1, limits::kMaxPid},
    {Key::kLen, 0, limits::kMaxBytes},
    {Key::kDeregs, 0, limits::kMaxCount},
    {Key::kThreads, 0, limits::kMaxCount},
    {Key::kSignal, 0, 255},
    {Key::kRank, 0, limits::kMaxRank},
    {Key::kLocalRank, 0, limits::kMaxRank},
};

// True when every bounded number of `v` is in its bounds; else a note naming the first one
// out of them.
bool NumbersInRange(const Fields& v, int lineno, FileNotes* notes) {
  for (const NumberBound& b : kNumberBounds) {
    element e;
    if (!Member(v, b.key, &e)) continue;
    element_type t = e.type();
    if (t != element_type::INT64 && t != element_type::UINT64 && t != element_type::DOUBLE)
      continue;  // not a number: read as absent where it is used
    std::optional<int64_t> n = IntOf(e);
    if (!n || *n < b.lo || *n > b.hi) {
      notes->Add(lineno, "a number out of range, skipped",
                 "\"" + std::string(KeyName(b.key)) + "\": " + simdjson::minify(e));
      return false;
    }
  }
  return true;
}

// A timestamp a line carries (ns since 1970), in [0, limits::kMaxTsNs]; else a note.
bool TimestampInRange(int64_t ts, int lineno, FileNotes* notes, const char* what) {
  if (ts >= 0 && ts <= limits::kMaxTsNs) return true;
  notes->Add(lineno, "a timestamp out of range, skipped",
             std::string(what) + " " + std::to_string(ts));
  return false;
}

// A /2 file's header: the process every later line of the file belongs to (until another
// header: a file of concatenated logs). Its module and stack tables start empty.
template <typename Sink>
void ParseV2Header(const Fields& v, std::string_view line, int lineno, FileNotes* notes,
                   Sink* sink) {
  V2Decoder* dec = sink->decoder();
  if (EventTypeOf(StrView(v, Key::kEvent)) != EventType::kHeader) {
    notes->Add(lineno, "a forkguard.event/2 line with \"schema\" that is not a header, skipped",
               "");
    return;
  }
  int64_t pid = Int(v, Key::kPid, -1);
  if (pid <= 0 || pid > limits::kMaxPid) {
    notes->Add(lineno, "no valid \"pid\" in the header, its lines are skipped", "");
    dec->on = false;
    return;
  }
  int64_t start_ns = Int(v, Key::kStartNs, 0);
  if (!TimestampInRange(start_ns, lineno, notes, "start_ns") || !NumbersInRange(v, lineno, notes)) {
    notes->Add(lineno, "the header is not valid, its lines are skipped", "");
    dec->on = false;
    return;
  }
  dec->Start(pid, start_ns);
  sink->Header(v, line, pid, lineno);
}

// A /2 line after the header: a module or stack record, or an event.
template <typename Sink>
void ParseV2Line(const Fields& v, std::string_view line, int lineno, FileNotes* notes, Sink* sink) {
  std::string_view type = StrView(v, Key::kEvent);
  if (type.empty()) {
    notes->Add(lineno, "no \"event\" field, skipped", "");
    return;
  }
  V2Decoder* dec = sink->decoder();
  EventType kind = EventTypeOf(type);
  if (kind == EventType::kModule || kind == EventType::kStackRecord) {
    int64_t id = -1;
    if (dec->Record(v, kind, type, lineno, notes, &id)) sink->Record(kind, id);
    return;
  }
  // start_ns is in range (the header's check); the sum is checked, not wrapped.
  int64_t ts = 0;
  if (__builtin_add_overflow(dec->start_ns, Int(v, Key::kTs, 0), &ts)) ts = -1;
  if (!TimestampInRange(ts, lineno, notes, "start_ns + ts") || !NumbersInRange(v, lineno, notes))
    return;
  sink->EventV2(v, line, type, kind, ts, lineno, notes);
}

// `line` is followed by at least simdjson::SIMDJSON_PADDING readable bytes.
template <typename Sink>
void ParseLine(std::string_view line, int lineno, bool last_unterminated, FileNotes* notes,
               Sink* sink) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (line.find_first_not_of(" \t") == std::string_view::npos) return;  // blank
  if (line.size() > kMaxLineBytes) {
    notes->Add(lineno, "line too long", std::to_string(line.size()) + " bytes, skipped");
    return;
  }
  if (LooksBinary(line)) {
    notes->Add(lineno, "binary data, not a JSON line", "");
    return;
  }
  element root;
  auto err = LineParser().parse(line.data(), line.size(), /*realloc_if_needed=*/false).get(root);
  if (err != simdjson::SUCCESS) {
    if (last_unterminated)
      notes->Add(lineno, "truncated last line (the process died while writing?)",
                 JsonErrorText(err));
    else
      notes->Add(lineno, "not JSON", JsonErrorText(err));
    return;
  }
  object obj;
  if (root.get_object().get(obj) != simdjson::SUCCESS) {
    notes->Add(lineno, "not a JSON object", "");
    return;
  }
  const Fields v(obj);
  element se;
  std::string_view schema;
  bool has_schema =
      Member(v, Key::kSchema, &se) && se.get_string().get(schema) == simdjson::SUCCESS;
  if (!has_schema) {
    if (sink->decoder()->on) {  // a /2 line: its process is the file's header's
      ParseV2Line(v, line, lineno, notes, sink);
      return;
    }
    notes->Add(lineno, "no \"schema\" field, not a forkguard event", "");
    return;
  }
  int major = schema == kEventSchema     ? 1
              : schema == kEventSchemaV2 ? 2
                                         : SchemaMajor(std::string(schema));
  if (major == 2) {
    ParseV2Header(v, line, lineno, notes, sink);
    return;
  }
  if (major != 1) {
    if (major < 0)
      notes->Add(lineno, "unknown schema, skipped", JsonQuote(schema));
    else
      notes->Add(lineno,
                 "schema " + JsonQuote(schema) +
                     " is a major version this forkguard does not read (it reads " +
                     std::string(kEventSchemaV2) + " and " + std::string(kEventSchema) +
                     "), skipped",
                 "");
    return;
  }
  std::string_view type = StrView(v, Key::kEvent);
  if (type.empty()) {
    notes->Add(lineno, "no \"event\" field, skipped", "");
    return;
  }
  int64_t pid = Int(v, Key::kPid, -1);
  if (pid <= 0 || pid > limits::kMaxPid) {
    notes->Add(lineno, "no valid \"pid\", skipped", "");
    return;
  }
  if (!TimestampInRange(Int(v, Key::kTsNs, 0), lineno, notes, "ts_ns") ||
      !NumbersInRange(v, lineno, notes))
    return;
  sink->EventV1(v, line, type, pid, lineno, notes);
}

// Splits `buf[0, size)` into lines and parses the complete ones; returns
// where the unfinished tail starts. `buf` has SIMDJSON_PADDING bytes after size.
template <typename Sink>
size_t ParseLines(const char* buf, size_t size, bool at_eof, int* lineno, FileNotes* notes,
                  Sink* sink) {
  size_t pos = 0;
  while (pos < size) {
    const void* nl = memchr(buf + pos, '\n', size - pos);
    if (!nl && !at_eof) break;
    size_t end = nl ? static_cast<size_t>(static_cast<const char*>(nl) - buf) : size;
    ++*lineno;
    ParseLine(std::string_view(buf + pos, end - pos), *lineno, !nl, notes, sink);
    pos = nl ? end + 1 : size;
  }
  return pos;
}

// "0x1a2b".
std::string HexText(uint64_t v) {
  char b[24];
  snprintf(b, sizeof(b), "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

Json FrameJson(const Frame& f) {
  Json o = Json::object();
  if (f.python) {
    Json py = Json::object();
    py.emplace(schema::kKeyFile, Json(f.py_file));
    py.emplace(schema::kKeyLine, Json(f.py_line));
    py.emplace(schema::kKeyFunc, Json(f.py_func));
    o.emplace(schema::kKeyPy, std::move(py));
    return o;
  }
  if (!f.off) {  // a raw address
    o.emplace(schema::kKeyIp, Json(HexText(f.ip)));
    return o;
  }
  o.emplace(schema::kKeyIp, Json(HexText(f.base + *f.off)));
  o.emplace(schema::kKeyObj, Json(f.obj));
  o.emplace(schema::kKeyOff, Json(HexText(*f.off)));
  const std::string& name = f.func.empty() ? f.sym : f.func;
  if (!name.empty()) o.emplace(schema::kKeySym, Json(name));
  return o;
}

// Writes the events V2Decoder and ParseLine yield as self-contained objects
// (DecodeEventRecords).
struct RecordSink {
  V2Decoder v2;
  const std::function<void(Stack*)>* symbolize;
  std::vector<EventRecord>* out;
  Json header;  // the members of the /2 header every event carries

  V2Decoder* decoder() { return &v2; }

  void Header(const Fields& /*v*/, std::string_view line, int64_t /*pid*/, int /*lineno*/) {
    Json h;
    ParseJson(line, &h, nullptr);  // simdjson read it already
    header = Json::object();
    for (const auto& [key, value] : h.items())
      if (key != schema::kKeySchema && key != schema::kKeyEvent && key != schema::kKeyStartNs)
        header.emplace(key, Json(value));
  }
  void Record(EventType /*kind*/, int64_t /*id*/) {}
  void EventV1(const Fields& /*v*/, std::string_view line, std::string_view /*type*/,
               int64_t /*pid*/, int lineno, FileNotes* /*notes*/) {
    EventRecord& r = out->emplace_back();
    r.line = lineno;
    ParseJson(line, &r.json, nullptr);
  }

  // A stack member: the frames of the record its id names (inline frames as they are).
  Json StackValue(const Json& v, int lineno, FileNotes* notes) const {
    if (!v.is_number_integer()) return v;
    std::optional<Stack> frames = v2.Frames(v.get<int64_t>(), lineno, notes);
    if (!frames) {
      notes->Add(lineno, "stack id used before or without its record",
                 "stack " + std::to_string(v.get<int64_t>()));
      return Json::array();
    }
    if (*symbolize) (*symbolize)(&*frames);
    Json a = Json::array();
    for (const Frame& f : *frames) a.push_back(FrameJson(f));
    return a;
  }
  // An object whose "stack" member is resolved.
  Json WithStack(const Json& o, int lineno, FileNotes* notes) const {
    if (!o.is_object()) return o;
    Json r = Json::object();
    for (const auto& [key, value] : o.items())
      r.emplace(key, key == schema::kKeyStack ? StackValue(value, lineno, notes) : Json(value));
    return r;
  }

  void EventV2(const Fields& /*v*/, std::string_view line, std::string_view type, EventType kind,
               int64_t ts, int lineno, FileNotes* notes) {
    Json in;
    ParseJson(line, &in, nullptr);  // simdjson read it already
    EventRecord& r = out->emplace_back();
    r.line = lineno;
    Json& e = r.json;
    e = Json::object();
    e.emplace(schema::kKeySchema, Json(std::string(kEventSchemaV2)));
    e.emplace(schema::kKeyEvent, Json(std::string(type)));
    for (const auto& [key, value] : header.items()) e.emplace(key, Json(value));
    e.emplace(schema::kKeyTsNs, Json(ts));
    for (const auto& [key, value] : in.items()) {
      if (key == schema::kKeyEvent || key == schema::kKeyTs) continue;
      if (key == schema::kKeyStack || key == schema::kKeyRegStack) {
        e.emplace(key, StackValue(value, lineno, notes));
      } else if (key == schema::kKeyInit) {
        e.emplace(key, WithStack(value, lineno, notes));
      } else if (key == schema::kKeySites && kind == EventType::kMrCounts && value.is_array()) {
        Json sites = Json::array();
        for (const Json& site : value) sites.push_back(WithStack(site, lineno, notes));
        e.emplace(key, std::move(sites));
      } else if (key == schema::kKeyMr && value.is_array()) {  // [addr, len, access, handle]
        int64_t f[4] = {0, 0, 0, 0};
        for (size_t i = 0; i < 4 && i < value.size(); ++i)
          f[i] = value[i].is_number_integer() ? value[i].get<int64_t>() : 0;
        e.emplace(schema::kKeyAddr, Json(f[0]));
        e.emplace(schema::kKeyLen, Json(f[1]));
        e.emplace(schema::kKeyAccess, Json(f[2]));
        e.emplace(schema::kKeyHandle, Json(HexText(static_cast<uint64_t>(f[3]))));
      } else {
        e.emplace(key, Json(value));
      }
    }
    if (!FindMember(e, schema::kKeyTid)) e.emplace(schema::kKeyTid, Json(v2.pid));
    if (kind == EventType::kMrRegister) {
      if (!FindMember(e, schema::kKeyCall))
        e.emplace(schema::kKeyCall, Json(schema::kDefaultRegCall));
      if (!FindMember(e, schema::kKeyDontfork)) e.emplace(schema::kKeyDontfork, Json());
    }
  }
};

// Streams `fd` through a fixed buffer: memory is one chunk plus the longest
// line, whatever the file's size.
void ReadStream(int fd, const std::string& path, const WithLogs* with_logs, LogSet* out) {
  FileNotes notes(path, out);
  FileState state;
  state.with_logs = with_logs;
  ReportSink sink{&state, path, out};
  // One buffer per reading thread, reused for every file (not zeroed: only
  // bytes read are parsed, simdjson only needs the padding to be readable).
  constexpr size_t kBufBytes = kChunkBytes + kMaxLineBytes + simdjson::SIMDJSON_PADDING;
  thread_local std::unique_ptr<char[]> storage(new char[kBufBytes]);
  char* const buf = storage.get();
  const size_t cap = kBufBytes - simdjson::SIMDJSON_PADDING;
  size_t have = 0;
  size_t total = 0;
  size_t overlong = 0;  // bytes of a line too long to hold, being skipped
  int lineno = 0;
  for (;;) {
    ssize_t n = read(fd, buf + have, cap - have);
    if (n < 0) {
      if (errno == EINTR) continue;
      out->notes.push_back(
          {path, std::string("read error: ") + strerror(errno) + " (using what was read)"});
      n = 0;
    }
    bool eof = n == 0;
    total += static_cast<size_t>(n);
    size_t start = 0;
    have += static_cast<size_t>(n);
    if (overlong > 0) {  // finish skipping the overlong line
      const void* nl = memchr(buf, '\n', have);
      size_t end = nl ? static_cast<size_t>(static_cast<const char*>(nl) - buf) : have;
      overlong += end;
      if (nl || eof) {
        ++lineno;
        notes.Add(lineno, "line too long", std::to_string(overlong) + " bytes, skipped");
        overlong = 0;
        start = nl ? end + 1 : have;
      } else {
        have = 0;
        continue;
      }
    }
    size_t done = start + ParseLines(buf + start, have - start, eof, &lineno, &notes, &sink);
    if (eof) break;
    memmove(buf, buf + done, have - done);
    have -= done;
    if (have > kMaxLineBytes) {  // a line longer than any the reader accepts
      overlong = have;
      have = 0;
    }
  }
  FinishFile(&state, out);
  if (total == 0) out->notes.push_back({path, "empty file"});
}

// The note for a file or directory `st` that `policy` does not take ("" when it does).
std::string NotTaken(const struct stat& st, const ReadPolicy& policy) {
  if (!policy.owner) return "";
  if (S_ISLNK(st.st_mode)) return "a symbolic link, not followed (--owner)";
  if (st.st_uid != *policy.owner)
    return "owned by uid " + std::to_string(st.st_uid) + ", not " + std::to_string(*policy.owner) +
           ": skipped (--owner)";
  return "";
}

void ReadFile(const std::string& path, const WithLogs* with_logs, const ReadPolicy& policy,
              LogSet* out) {
  bool is_stdin = path == "-";  // `forkguard report -`: a stream of lines
  int flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | (policy.owner ? O_NOFOLLOW : 0);
  int fd = is_stdin ? dup(STDIN_FILENO) : open(path.c_str(), flags);
  if (fd < 0) {
    out->notes.push_back({path, errno == ELOOP && policy.owner
                                    ? "a symbolic link, not followed (--owner)"
                                    : std::string("cannot open: ") + strerror(errno)});
    return;
  }
  struct stat st;
  if (!is_stdin && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
    out->notes.push_back({path, "not a regular file, skipped"});
    close(fd);
    return;
  }
  // Checked on the open file: what was read is what was checked.
  if (std::string why = is_stdin ? "" : NotTaken(st, policy); !why.empty()) {
    out->notes.push_back({path, why});
    close(fd);
    return;
  }
  ++out->files_read;
  ReadStream(fd, path, with_logs, out);
  close(fd);
}

// What ReadLogs does, in order: read a file, or say something about a path.
struct Item {
  std::string file;  // empty: a note only
  Note note;
};

// Files and directories already taken, by (device, inode): a log reached twice through
// symlinks (a job directory of links to per-host directories, a link loop) is read once.
struct Seen {
  std::set<std::pair<dev_t, ino_t>> dirs, files;
  bool First(std::set<std::pair<dev_t, ino_t>>& set, const struct stat& st) {
    return set.insert({st.st_dev, st.st_ino}).second;
  }
};

bool IsLogName(const std::string& n) {
  return n.size() > 6 && n.compare(n.size() - 6, 6, ".jsonl") == 0;
}

// Symlinks are followed, to files and to directories (collected logs are often links),
// unless `policy` says otherwise; each directory and each file is taken once, so a link
// loop ends.
void Walk(const std::string& dir, int depth, const ReadPolicy& policy, int* found,
          std::vector<Item>* items, Seen* seen) {
  DIR* d = opendir(dir.c_str());
  if (!d) {
    items->push_back({"", {dir, std::string("cannot read directory: ") + strerror(errno)}});
    return;
  }
  std::vector<std::string> names;
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  for (const auto& n : names) {
    std::string p = dir + (dir.empty() || dir.back() == '/' ? "" : "/") + n;
    struct stat st;
    if ((policy.owner ? lstat(p.c_str(), &st) : stat(p.c_str(), &st)) != 0) {
      if (IsLogName(n)) items->push_back({"", {p, std::string("cannot read: ") + strerror(errno)}});
      continue;
    }
    if (std::string why = NotTaken(st, policy); !why.empty()) {
      if (S_ISDIR(st.st_mode) || S_ISLNK(st.st_mode) || IsLogName(n))
        items->push_back({"", {p, why}});
      continue;
    }
    if (S_ISDIR(st.st_mode)) {
      if (depth < 8 && seen->First(seen->dirs, st)) Walk(p, depth + 1, policy, found, items, seen);
    } else if (S_ISREG(st.st_mode) && IsLogName(n)) {
      if (!seen->First(seen->files, st)) continue;  // the same file through another link
      ++*found;
      items->push_back({p, {}});
    }
  }
}

void Merge(LogSet&& part, LogSet* out) {
  for (auto& p : part.processes) out->processes.push_back(std::move(p));
  for (auto& n : part.notes) out->notes.push_back(std::move(n));
  out->files_read += part.files_read;
  out->lines_used += part.lines_used;
  out->lines_skipped += part.lines_skipped;
}

}  // namespace

void FixTally::Take(const FixTally& o) {
  forks = SatAdd(forks, o.forks);
  copied_ranges = SatAdd(copied_ranges, o.copied_ranges);
  copied_bytes = SatAdd(copied_bytes, o.copied_bytes);
  withheld_ranges = SatAdd(withheld_ranges, o.withheld_ranges);
  withheld_bytes = SatAdd(withheld_bytes, o.withheld_bytes);
  copied_kinds |= o.copied_kinds;
  withheld_kinds |= o.withheld_kinds;
  failed_ranges = SatAdd(failed_ranges, o.failed_ranges);
}

std::vector<std::string> FixTally::KindNames(unsigned mask) {
  std::vector<std::string> out;
  for (size_t k = 0; k < std::size(kKinds); ++k)
    if (mask & (1u << k)) out.emplace_back(kKinds[k]);
  return out;
}

void ForkRangesAtWorst::Take(int ranges, int64_t range_bytes, int dontfork, int64_t threads,
                             std::optional<bool> cof) {
  if (range_bytes > max_range_bytes || (range_bytes == max_range_bytes && ranges > max_ranges)) {
    max_ranges = ranges;
    max_range_bytes = range_bytes;
    dontfork_ranges = dontfork;
  }
  max_threads = std::max(max_threads, threads);
  if (cof) kernel_cof = cof;
}

void ForkHistogram::Add(int64_t ts_ns, int64_t n, int64_t n_hazard) {
  if (forks.empty()) {
    t0_ns = ts_ns;
    forks.assign(kBins, 0);
    hazard.assign(kBins, 0);
  }
  if (ts_ns < t0_ns) ts_ns = t0_ns;  // out of order: counted in the first bin
  // The offset from the first fork, unsigned: exact for any two int64 values with
  // ts_ns >= t0_ns, so the bin index is in range whatever a log says.
  const uint64_t offset = static_cast<uint64_t>(ts_ns) - static_cast<uint64_t>(t0_ns);
  while (offset / static_cast<uint64_t>(width_ns) >= kBins) {
    for (size_t i = 0; i < kBins / 2; ++i) {
      forks[i] = SatAdd(forks[2 * i], forks[2 * i + 1]);
      hazard[i] = SatAdd(hazard[2 * i], hazard[2 * i + 1]);
    }
    std::fill(forks.begin() + kBins / 2, forks.end(), 0);
    std::fill(hazard.begin() + kBins / 2, hazard.end(), 0);
    width_ns *= 2;  // at most 2^58 here: 64 bins of it span every uint64 offset
  }
  size_t b = static_cast<size_t>(offset / static_cast<uint64_t>(width_ns));
  forks[b] = SatAdd(forks[b], n);
  hazard[b] = SatAdd(hazard[b], n_hazard);
}

namespace {

// Folds process `b` (a later program of the same pid) into `a`.
void JoinInto(ProcessLog&& b, ProcessLog* a) {
  const int stack_base = static_cast<int>(a->stacks.size());
  const int site_base = static_cast<int>(a->fork_sites.size());
  int line_base = 0;
  for (const Event& e : a->events) line_base = std::max(line_base, e.line);
  for (const ForkSample& f : a->fork_sample) line_base = std::max(line_base, f.line);
  auto stack = [&](int id) { return id < 0 ? id : id + stack_base; };
  for (Stack& s : b.stacks) a->stacks.push_back(std::move(s));
  for (Event& e : b.events) {
    e.stack = stack(e.stack);
    e.init_stack = stack(e.init_stack);
    e.line += line_base;
    a->events.push_back(std::move(e));
  }
  for (ForkSite& s : b.fork_sites) {
    s.stack = stack(s.stack);
    s.init_stack = stack(s.init_stack);
    a->fork_sites.push_back(std::move(s));
  }
  for (ForkSample& f : b.fork_sample) {
    f.site += site_base;
    f.line += line_base;
    f.ordinal += a->forks;
    a->fork_sample.push_back(std::move(f));
  }
  for (ChildLink& l : b.child_links) {
    l.site += site_base;
    a->child_links.push_back(l);
  }
  for (size_t k = 0; k < b.fork_bins.forks.size(); ++k)
    if (b.fork_bins.forks[k] > 0)
      a->fork_bins.Add(b.fork_bins.t0_ns + static_cast<int64_t>(k) * b.fork_bins.width_ns,
                       b.fork_bins.forks[k], b.fork_bins.hazard[k]);
  if (a->first_fork_ns == 0 || (b.first_fork_ns > 0 && b.first_fork_ns < a->first_fork_ns))
    a->first_fork_ns = b.first_fork_ns;
  a->last_fork_ns = std::max(a->last_fork_ns, b.last_fork_ns);
  a->forks += b.forks;
  a->fork_children += b.fork_children;
  ProcessSummary& s = a->summary;
  for (const auto& [type, n] : b.summary.counts) {
    auto it = s.counts.find(type);
    if (it != s.counts.end())
      it->second += n;
    else if (s.counts.size() < kMaxCountedTypes)
      s.counts.emplace(type, n);
    else
      s.counts["other"] += n;
  }
  s.lines += b.summary.lines;
  for (RegistrationSample& r : b.summary.first_registrations)
    if (s.first_registrations.size() < ProcessSummary::kMaxRegistrationSamples)
      s.first_registrations.push_back(std::move(r));
  s.last_ts_ns = std::max(s.last_ts_ns, b.summary.last_ts_ns);
  if (s.rdma_init_ts_ns == 0) s.rdma_init_ts_ns = b.summary.rdma_init_ts_ns;
  s.registrations = SatAdd(s.registrations, b.summary.registrations);
  s.registered_bytes = SatAdd(s.registered_bytes, b.summary.registered_bytes);
  a->execs.push_back({a->prog, a->file});
  for (ProcessLog::Exec& x : b.execs) a->execs.push_back(std::move(x));
  if (!b.prog.empty()) a->prog = std::move(b.prog);
  a->file = std::move(b.file);
  if (a->ppid <= 0) a->ppid = b.ppid;
  if (!a->rank) a->rank = b.rank;
  if (!a->local_rank) a->local_rank = b.local_rank;
  if (b.first_ts_ns > 0 && (a->first_ts_ns == 0 || b.first_ts_ns < a->first_ts_ns))
    a->first_ts_ns = b.first_ts_ns;
}

// When process `p` last exec'd, if it did and did not exit after it; nullopt otherwise.
std::optional<int64_t> ExecTs(const ProcessLog& p) {
  std::optional<int64_t> at;
  for (const Event& e : p.events) {
    if (e.kind == EventType::kExec)
      at = e.ts_ns;
    else if (e.kind == EventType::kProcessExit)
      at.reset();
  }
  return at;
}

}  // namespace

void JoinExecs(LogSet* logs) {
  std::map<std::tuple<std::string, std::string, int64_t>, std::vector<size_t>> by_pid;
  bool any = false;
  for (size_t i = 0; i < logs->processes.size(); ++i) {
    const ProcessLog& p = logs->processes[i];
    auto& v = by_pid[{p.host, p.job, p.pid}];
    v.push_back(i);
    any = any || v.size() > 1;
  }
  if (!any) return;
  std::vector<bool> gone(logs->processes.size(), false);
  for (auto& [key, v] : by_pid) {
    if (v.size() < 2) continue;
    std::stable_sort(v.begin(), v.end(), [&](size_t x, size_t y) {
      return logs->processes[x].first_ts_ns < logs->processes[y].first_ts_ns;
    });
    size_t into = v[0];
    for (size_t k = 1; k < v.size(); ++k) {
      ProcessLog& a = logs->processes[into];
      ProcessLog& b = logs->processes[v[k]];
      std::optional<int64_t> exec = ExecTs(a);
      if (exec && (b.first_ts_ns == 0 || b.first_ts_ns >= *exec)) {
        JoinInto(std::move(b), &a);
        gone[v[k]] = true;
      } else {
        into = v[k];
      }
    }
  }
  std::vector<ProcessLog> kept;
  kept.reserve(logs->processes.size());
  for (size_t i = 0; i < logs->processes.size(); ++i)
    if (!gone[i]) kept.push_back(std::move(logs->processes[i]));
  logs->processes = std::move(kept);
}

const Stack& ProcessLog::StackAt(int id) const {
  static const Stack kEmpty;
  if (id < 0 || static_cast<size_t>(id) >= stacks.size()) return kEmpty;
  return stacks[static_cast<size_t>(id)];
}

std::optional<uint64_t> ParseAddress(const Json* v) {
  if (!v) return std::nullopt;
  if (v->is_number_integer() && v->get<int64_t>() >= 0)
    return static_cast<uint64_t>(v->get<int64_t>());
  if (!v->is_string()) return std::nullopt;
  return ParseAddressText(v->get_ref<const std::string&>());
}

std::optional<uint64_t> ParseAddressText(std::string_view s) {
  size_t i = 0;
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    i = 2;
    base = 16;
  }
  if (i >= s.size() || s.size() - i > 16 + (base == 10 ? 4 : 0)) return std::nullopt;
  uint64_t r = 0;
  for (; i < s.size(); ++i) {
    char c = s[i];
    int d;
    if (c >= '0' && c <= '9')
      d = c - '0';
    else if (base == 16 && c >= 'a' && c <= 'f')
      d = c - 'a' + 10;
    else if (base == 16 && c >= 'A' && c <= 'F')
      d = c - 'A' + 10;
    else
      return std::nullopt;
    if (r > (UINT64_MAX - static_cast<uint64_t>(d)) / static_cast<uint64_t>(base))
      return std::nullopt;
    r = r * static_cast<uint64_t>(base) + static_cast<uint64_t>(d);
  }
  return r;
}

void ParseLogText(std::string_view file_name, std::string_view text, LogSet* out) {
  FileNotes notes(file_name, out);
  FileState state;
  std::string buf(text);  // simdjson reads a few bytes past each line
  buf.append(simdjson::SIMDJSON_PADDING, '\0');
  int lineno = 0;
  ReportSink sink{&state, file_name, out};
  ParseLines(buf.data(), text.size(), true, &lineno, &notes, &sink);
  FinishFile(&state, out);
}

std::vector<EventRecord> DecodeEventRecords(std::string_view file_name, std::string_view text,
                                            const std::function<void(Stack*)>& symbolize,
                                            std::vector<Note>* notes) {
  std::vector<EventRecord> records;
  LogSet skipped;
  {
    FileNotes file_notes(file_name, &skipped);
    RecordSink sink{{}, &symbolize, &records, Json::object()};
    std::string buf(text);  // simdjson reads a few bytes past each line
    buf.append(simdjson::SIMDJSON_PADDING, '\0');
    int lineno = 0;
    ParseLines(buf.data(), text.size(), true, &lineno, &file_notes, &sink);
  }
  for (Note& n : skipped.notes) notes->push_back(std::move(n));
  return records;
}

bool ReadInputFile(const std::string& path, size_t max_bytes, std::string* text,
                   std::string* error) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    *error = strerror(errno);
    return false;
  }
  struct stat st;
  bool ok = fstat(fd, &st) == 0;
  if (!ok) {
    *error = strerror(errno);
  } else if (!S_ISREG(st.st_mode)) {
    *error = "not a regular file";
    ok = false;
  } else if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    *error = "larger than " + std::to_string(max_bytes >> 20) + " MiB";
    ok = false;
  }
  text->clear();
  char buf[65536];
  while (ok) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *error = strerror(errno);
      ok = false;
    } else if (n == 0) {
      break;
    } else if (text->size() + static_cast<size_t>(n) > max_bytes) {
      *error = "larger than " + std::to_string(max_bytes >> 20) + " MiB";
      ok = false;
    } else {
      text->append(buf, static_cast<size_t>(n));
    }
  }
  close(fd);
  return ok;
}

void ReadLogs(const std::vector<std::string>& paths, LogSet* out, int threads,
              const ReadPolicy& policy) {
  std::vector<Item> items;
  Seen seen;
  for (const auto& p : paths) {
    if (p == "-") {
      items.push_back({p, {}});
      continue;
    }
    struct stat st;
    if ((policy.owner ? lstat(p.c_str(), &st) : stat(p.c_str(), &st)) != 0) {
      items.push_back({"", {p, std::string("cannot read: ") + strerror(errno)}});
      continue;
    }
    if (std::string why = NotTaken(st, policy); !why.empty()) {
      items.push_back({"", {p, why}});
      continue;
    }
    if (S_ISDIR(st.st_mode)) {
      int found = 0;
      seen.First(seen.dirs, st);
      Walk(p, 0, policy, &found, &items, &seen);
      if (found == 0) items.push_back({"", {p, "no event logs (*.jsonl) in this directory"}});
    } else if (!S_ISREG(st.st_mode) || seen.First(seen.files, st)) {
      items.push_back({p, {}});
    }
  }
  // The processes that have a log of their own, from the names the shim gives its files.
  WithLogs with_logs;
  bool with_logs_known = true;
  for (const Item& it : items) {
    if (it.file.empty()) continue;
    auto id = ShimFileIdentity(it.file);
    if (!id) {
      with_logs_known = false;
      break;
    }
    with_logs.insert(std::move(*id));
  }
  // Each file into its own LogSet, merged in order: the same result for any
  // number of threads.
  std::vector<LogSet> parts(items.size());
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < items.size();) {
      if (items[i].file.empty())
        parts[i].notes.push_back(items[i].note);
      else
        ReadFile(items[i].file, with_logs_known ? &with_logs : nullptr, policy, &parts[i]);
    }
  };
  if (threads <= 0)
    threads = static_cast<int>(std::min(8u, std::max(1u, std::thread::hardware_concurrency())));
  threads = std::min<int>(threads, static_cast<int>(items.size()));
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  for (auto& part : parts) Merge(std::move(part), out);
  JoinExecs(out);
}

}  // namespace forkguard::cli
