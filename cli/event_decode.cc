// Decoding one event's record: its stacks, its typed fields, fix mode's ranges.
#include "cli/event_decode.h"

#include <algorithm>
#include <iterator>
#include <optional>
#include <string_view>
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

void DecodeEvent(const Fields& o, StackIndexer* stacks, FileNotes* notes, int lineno, Event* e) {
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
      e->stack = StackAt(o, Key::kStack, stacks);
      break;
    }
    case EventType::kFork: {
      e->verdict = Str(o, Key::kVerdict, kAbsentValue);
      e->site = Str(o, Key::kSite);
      e->action = Str(o, Key::kAction, kAbsentValue);
      e->via = Str(o, Key::kVia);
      e->fix = Str(o, Key::kFix);
      e->suppressed = Str(o, Key::kSuppressed);
      e->fix_library = Str(o, Key::kHeldBy);
      object fs;
      if (e->fix_library.empty() && Member(o, Key::kForkSupport, &x) &&
          x.get_object().get(fs) == simdjson::SUCCESS)
        e->fix_library = Str(fs, Key::kBy);
      e->stack = StackAt(o, Key::kStack, stacks);
      Strings(o, Key::kReasons, 16, &e->reasons);
      if ((e->action == schema::kActionFailed || e->action == schema::kActionRefused) &&
          Member(o, Key::kErrno, &x)) {
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
        e->init_stack = StackAt(init, Key::kStack, stacks);
      }
      simdjson::dom::array a;
      FixTally& fix = e->fix_tally;
      fix.forks = e->action == schema::kActionFixed ? 1 : 0;
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
            TallyFixedRange(fe, StrView(ro, Key::kKind), len, &fix, notes, lineno, &fix_noted);
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
      e->stack = StackAt(o, Key::kRegStack, stacks);
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

}  // namespace forkguard::cli
