// Decoding one event's record: its stacks, its typed fields, fix mode's ranges.
#include "cli/event_decode.h"

#include <algorithm>
#include <iterator>
#include <optional>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

namespace forkguard::cli {
namespace {

using namespace reader_names;

// A stack member `key` of `o`: its index by `stacks`, -1 when absent.
template <typename O>
int StackAt(const O& o, Key key, StackIndexer* stacks) {
  element e;
  if (!Member(o, key, &e)) return -1;
  return stacks->Index(e);
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
void TallyFixedRange(element v, std::string_view kind, int64_t len, FixTally* fix, FileNotes* notes,
                     int lineno, bool* noted) {
  std::string_view s;
  bool is_string = v.get_string().get(s) == simdjson::SUCCESS;
  if (is_string && s == schema::kFixedFailed) {
    fix->failed_ranges = SatAdd(fix->failed_ranges, 1);
    return;
  }
  bool copied = is_string && s == schema::kFixedCopied,
       withheld = is_string && s == schema::kFixedWithheld;
  if (!copied && !withheld) {
    if (!*noted && notes != nullptr) {
      // At most 64 bytes of it, cut where a UTF-8 character starts.
      std::string shown = is_string ? std::string(s) : simdjson::minify(v);
      if (shown.size() > 64) {
        size_t cut = 64;
        while (cut > 0 && (static_cast<unsigned char>(shown[cut]) & 0xc0) == 0x80) --cut;
        shown = shown.substr(0, cut) + "…";
      }
      if (is_string) shown = JsonQuote(shown);
      notes->Note(lineno,
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

}  // namespace

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

namespace {

// Whether formats/event_schema.h places key `k` in `where`: a record type (an EventType:
// FORKGUARD_RECORD_KEYS), or a member whose value is an object or an array of them (a Key:
// FORKGUARD_OBJECT_KEYS).
template <typename Where>
constexpr bool Placed(Where where, Key k) {
#define FORKGUARD_X(w, key) \
  if (where == Where::k##w && k == Key::k##key) return true;
  if constexpr (std::is_same_v<Where, EventType>) {
    FORKGUARD_RECORD_KEYS(FORKGUARD_X)
  } else {
    FORKGUARD_OBJECT_KEYS(FORKGUARD_X)
  }
#undef FORKGUARD_X
  return false;
}

// Not constexpr: called, it ends the compile-time evaluation of a misplaced key's name.
inline void NotAKeyOfThisRecord() {}

// The keys of record type `kWhere` (an EventType), or of the objects of member `kWhere` (a
// Key): `key(Key::kVia)` in a decoder is its argument when the schema places the key there,
// and does not compile when it does not (a key read here is a key of the schema, of the
// record it is read from).
template <auto kWhere>
struct KeysOf {
  consteval Key operator()(Key k) const {
    if (!Placed(kWhere, k)) NotAKeyOfThisRecord();
    return k;
  }
};

// An object member `key` of `o`: false when absent or not an object.
template <typename O>
bool ObjectAt(const O& o, Key key, object* out) {
  element x;
  return Member(o, key, &x) && x.get_object().get(*out) == simdjson::SUCCESS;
}

// A bool member `key` of `o`: nullopt when absent or not a bool.
std::optional<bool> OptionalBool(const Fields& o, Key key) {
  element x;
  bool b = false;
  if (Member(o, key, &x) && x.get_bool().get(b) == simdjson::SUCCESS) return b;
  return std::nullopt;
}

// One Decode per record type: its typed fields from the line's members `o`.

void Decode(const Fields& o, StackIndexer* /*stacks*/, ProcessStart* r) {
  static constexpr KeysOf<ProcessStart::kType> key{};
  r->exe = Str(o, key(Key::kExe));
  r->mode = Str(o, key(Key::kMode));
  Strings(o, key(Key::kArgv), 64, &r->argv);
}

void Decode(const Fields& o, StackIndexer* /*stacks*/, ProcessExit* r) {
  static constexpr KeysOf<ProcessExit::kType> key{};
  element x;
  if (Member(o, key(Key::kStatus), &x) && x.type() == element_type::INT64)
    r->status = x.get_int64().value_unsafe();
}

void Decode(const Fields& o, StackIndexer* stacks, RdmaInit* r) {
  static constexpr KeysOf<RdmaInit::kType> key{};
  r->call = Str(o, key(Key::kCall), "?");
  r->device = Str(o, key(Key::kDevice));
  r->stack = StackAt(o, key(Key::kStack), stacks);
}

void Decode(const Fields& o, StackIndexer* /*stacks*/, ForkChild* r) {
  static constexpr KeysOf<ForkChild::kType> key{};
  r->child_pid = Int(o, key(Key::kChildPid), -1);
}

void Decode(const Fields& o, StackIndexer* /*stacks*/, Spawn* r) {
  static constexpr KeysOf<Spawn::kType> key{};
  r->call = Str(o, key(Key::kCall));
  r->child_pid = Int(o, key(Key::kChildPid), -1);
}

void Decode(const Fields& o, StackIndexer* /*stacks*/, ChildExec* r) {
  static constexpr KeysOf<ChildExec::kType> key{};
  r->path = Str(o, key(Key::kPath));
}

void Decode(const Fields& o, StackIndexer* stacks, ChildSegv* r) {
  static constexpr KeysOf<ChildSegv::kType> key{};
  static constexpr KeysOf<Key::kRange> range_key{};
  r->signal = static_cast<int>(Int(o, key(Key::kSignal), 11));
  r->addr = AddressAt(o, key(Key::kAddr));
  object rg;
  if (ObjectAt(o, key(Key::kRange), &rg)) {
    r->range_addr = AddressAt(rg, range_key(Key::kAddr));
    r->range_len = AddressAt(rg, range_key(Key::kLen));
  }
  r->call = Str(o, key(Key::kCall));
  r->reg_stack = StackAt(o, key(Key::kRegStack), stacks);
}

void Decode(const Fields& o, StackIndexer* /*stacks*/, NoteRecord* r) {
  static constexpr KeysOf<NoteRecord::kType> key{};
  r->text = Str(o, key(Key::kText));
}

void Decode(const Fields& o, StackIndexer* /*stacks*/, UnwatchedExec* r) {
  static constexpr KeysOf<UnwatchedExec::kType> key{};
  r->path = Str(o, key(Key::kPath));
  r->exec_by = Str(o, key(Key::kExecBy));
  Strings(o, key(Key::kWhy), 16, &r->why);
  r->held_rdma = OptionalBool(o, key(Key::kHeldRdma));
}

// The record of event `e`: the first of Event::Record's types (from the I-th on) whose kType
// is the event's, decoded into it.
template <size_t I = 1>
void DecodeRecord(const Fields& o, StackIndexer* stacks, Event* e) {
  if constexpr (I < std::variant_size_v<Event::Record>) {
    using R = std::variant_alternative_t<I, Event::Record>;
    if (e->kind == R::kType) return Decode(o, stacks, &e->record.emplace<R>());
    DecodeRecord<I + 1>(o, stacks, e);
  }
}

constexpr KeysOf<Fork::kType> kForkKey{};

// The errno of a fork that failed or was refused: a number or a string.
std::string ForkErrno(const Fields& o) {
  element x;
  std::string_view v;
  if (!Member(o, kForkKey(Key::kErrno), &x)) return "";
  if (x.type() == element_type::INT64) return std::to_string(x.get_int64().value_unsafe());
  if (x.get_string().get(v) == simdjson::SUCCESS) return std::string(v);
  return "";
}

// The fork's `init` object: the RDMA init it saw.
std::optional<Fork::Init> ForkInit(const Fields& o, StackIndexer* stacks) {
  static constexpr KeysOf<Key::kInit> key{};
  object init;
  if (!ObjectAt(o, kForkKey(Key::kInit), &init)) return std::nullopt;
  Fork::Init in;
  in.age_ms = std::clamp<int64_t>(Int(init, key(Key::kAgeMs), -1), -1, limits::kMaxTsNs);
  in.call = Str(init, key(Key::kCall), "?");
  in.device = Str(init, key(Key::kDevice));
  in.stack = StackAt(init, key(Key::kStack), stacks);
  return in;
}

// The fork's registered ranges: counted, their bytes summed, fix mode's changes tallied.
void ForkRanges(const Fields& o, FileNotes* notes, int lineno, Fork* f) {
  static constexpr KeysOf<Key::kRanges> key{};
  element x;
  simdjson::dom::array a;
  if (!Member(o, kForkKey(Key::kRanges), &x) || x.get_array().get(a) != simdjson::SUCCESS) return;
  bool fix_noted = false;
  for (element r : a) {
    object ro;
    if (r.get_object().get(ro) != simdjson::SUCCESS) continue;
    ++f->ranges;
    int64_t len = std::clamp<int64_t>(Int(ro, key(Key::kLen), 0), 0, limits::kMaxBytes);
    f->range_bytes = SatAdd(f->range_bytes, len);
    if (Bool(ro, key(Key::kDontfork), false)) ++f->dontfork_ranges;
    element fe;
    if (Member(ro, key(Key::kFixed), &fe))
      TallyFixedRange(fe, StrView(ro, key(Key::kKind)), len, &f->fix_tally, notes, lineno,
                      &fix_noted);
  }
}

}  // namespace

void DecodeEvent(const Fields& o, StackIndexer* stacks, Event* e) {
  DecodeRecord(o, stacks, e);  // the other types keep only the common fields
}

void DecodeFork(const Fields& o, StackIndexer* stacks, FileNotes* notes, int lineno, Fork* f) {
  static constexpr KeysOf<Key::kForkSupport> support_key{};
  std::vector<std::string> reasons = std::move(f->reasons);  // its storage reused
  reasons.clear();
  *f = Fork();
  f->reasons = std::move(reasons);
  f->verdict = Str(o, kForkKey(Key::kVerdict), kAbsentValue);
  f->site = Str(o, kForkKey(Key::kSite));
  f->action = Str(o, kForkKey(Key::kAction), kAbsentValue);
  f->via = Str(o, kForkKey(Key::kVia));
  f->fix = Str(o, kForkKey(Key::kFix));
  f->suppressed = Str(o, kForkKey(Key::kSuppressed));
  f->fix_library = Str(o, kForkKey(Key::kHeldBy));
  object fs;
  if (f->fix_library.empty() && ObjectAt(o, kForkKey(Key::kForkSupport), &fs))
    f->fix_library = Str(fs, support_key(Key::kBy));
  f->stack = StackAt(o, kForkKey(Key::kStack), stacks);
  Strings(o, kForkKey(Key::kReasons), 16, &f->reasons);
  if (f->action == schema::kActionFailed || f->action == schema::kActionRefused)
    f->errno_text = ForkErrno(o);
  f->init = ForkInit(o, stacks);
  f->fix_tally.forks = f->action == schema::kActionFixed ? 1 : 0;
  ForkRanges(o, notes, lineno, f);
  f->threads = Int(o, kForkKey(Key::kThreads), 0);
  f->kernel_cof = OptionalBool(o, kForkKey(Key::kKernelCof));
}

}  // namespace forkguard::cli
