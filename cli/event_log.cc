#include "cli/event_log.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <thread>
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

// Tolerant typed lookups, as JsonValue::Get* (first member of that name).
bool Member(object o, std::string_view key, element* out) {
  return o.at_key(key).get(*out) == simdjson::SUCCESS;
}
std::string Str(object o, std::string_view key, std::string fallback = "") {
  element e;
  std::string_view v;
  if (Member(o, key, &e) && e.get_string().get(v) == simdjson::SUCCESS) return std::string(v);
  return fallback;
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
int64_t Int(object o, std::string_view key, int64_t fallback) {
  element e;
  if (!Member(o, key, &e)) return fallback;
  return IntOf(e).value_or(fallback);
}
bool Bool(object o, std::string_view key, bool fallback) {
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
std::optional<uint64_t> AddressAt(object o, std::string_view key) {
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
      if (Member(fo, "py", &py) && py.get_object().get(po) == simdjson::SUCCESS) {
        fr.python = true;
        fr.py_file = Str(po, "file");
        fr.py_line = Int(po, "line", 0);
        fr.py_func = Str(po, "func");
      } else {
        fr.ip = AddressAt(fo, "ip").value_or(0);
        fr.obj = Str(fo, "obj");
        fr.off = AddressAt(fo, "off");
        fr.sym = Str(fo, "sym");
        fr.symoff = Str(fo, "symoff");
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

// The per-file state: processes met in this file and their stack tables.
struct FileState {
  struct Proc {
    size_t index;  // into out->processes
    std::unordered_map<std::string, int> stack_ids;
  };
  std::map<std::pair<std::string, int64_t>, Proc> by_proc;
  std::map<std::pair<std::string, int64_t>, Proc>::iterator last = by_proc.end();
  // forkguard.event/2: the file's header (its process), module map and stack table.
  struct Module {
    std::string path;
    std::string build_id;
  };
  bool v2 = false;
  int64_t v2_start_ns = 0;
  std::map<std::pair<std::string, int64_t>, Proc>::iterator v2_proc = by_proc.end();
  std::unordered_map<int64_t, Module> modules;
  std::unordered_map<int64_t, int> stacks;  // /2 id -> index in ProcessLog::stacks
  // Where the line being decoded is (for the notes of stack references).
  FileNotes* notes = nullptr;
  int lineno = 0;
};

int InternDecoded(Stack st, FileState::Proc* proc, ProcessLog* p) {
  std::string key = StackIdentity(st);
  auto [it, fresh] = proc->stack_ids.emplace(std::move(key), static_cast<int>(p->stacks.size()));
  if (fresh) p->stacks.push_back(std::move(st));
  return it->second;
}
int InternStack(element v, FileState::Proc* proc, ProcessLog* p) {
  return InternDecoded(DecodeStack(v), proc, p);
}

// A stack value: an array (inline frames, /1 and /2) or, in /2, the id of a stack record.
int StackAt(object o, std::string_view key, FileState::Proc* proc, ProcessLog* p,
            FileState* state = nullptr) {
  element e;
  if (!Member(o, key, &e)) return -1;
  if (state != nullptr && state->v2 &&
      (e.type() == element_type::INT64 || e.type() == element_type::UINT64)) {
    int64_t id = IntOf(e).value_or(-1);
    auto it = state->stacks.find(id);
    if (it != state->stacks.end()) return it->second;
    state->notes->Add(state->lineno, "stack id used before or without its record",
                      "stack " + std::to_string(id) + " (the event is kept without it)");
    return -1;
  }
  return InternStack(e, proc, p);
}

// A /2 stack record's frames: [module, off] pairs (module -1: off is a raw address) and
// Python frames; a module id not (yet) met gets a note and raw offsets.
Stack DecodeV2Frames(element v, FileState* state, int64_t id) {
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
      } else if (auto it = state->modules.find(m); it != state->modules.end()) {
        fr.obj = it->second.path;
        fr.build_id = it->second.build_id;
        fr.off = off;
      } else {
        if (!noted)
          state->notes->Add(state->lineno, "module used before or without its record",
                            "stack " + std::to_string(id) + " uses module " + std::to_string(m) +
                                " (its offsets stay raw)");
        noted = true;
        fr.ip = *off;
      }
    } else if (f.get_object().get(fo) == simdjson::SUCCESS) {
      element py;
      object po;
      if (!Member(fo, "py", &py) || py.get_object().get(po) != simdjson::SUCCESS) continue;
      fr.python = true;
      fr.py_file = Str(po, "file");
      fr.py_line = Int(po, "line", 0);
      fr.py_func = Str(po, "func");
    } else {
      continue;
    }
    out.push_back(std::move(fr));
    if (out.size() >= 256) break;
  }
  return out;
}

// Events that only count: one per registration or verbs call, millions in a
// job, and nothing in the report reads their fields. (mr_deregister: one per
// deregistration in older files; the shim now writes it only for MRs it did
// not see registered.)
bool CountOnly(std::string_view type) {
  return type == "mr_register" || type == "mr_deregister" || type == "rdma_call" ||
         type == "fork_init";
}

// The typed fields of `e.type` from `o`.
void DecodeEvent(object o, FileState::Proc* proc, ProcessLog* p, Event* e, FileState* state) {
  const std::string& t = e->type;
  element x;
  if (t == "process_start") {
    e->exe = Str(o, "exe");
    e->mode = Str(o, "mode");
    simdjson::dom::array a;
    if (Member(o, "argv", &x) && x.get_array().get(a) == simdjson::SUCCESS) {
      for (element s : a) {
        std::string_view v;
        if (s.get_string().get(v) == simdjson::SUCCESS && e->argv.size() < 64)
          e->argv.emplace_back(v);
      }
    }
  } else if (t == "process_exit") {
    if (Member(o, "status", &x) && x.type() == element_type::INT64)
      e->status = x.get_int64().value_unsafe();
  } else if (t == "rdma_init") {
    e->call = Str(o, "call", "?");
    e->device = Str(o, "device");
    e->stack = StackAt(o, "stack", proc, p, state);
  } else if (t == "fork") {
    e->verdict = Str(o, "verdict", "unknown");
    e->site = Str(o, "site");
    e->action = Str(o, "action", "unknown");
    e->via = Str(o, "via");
    e->fix = Str(o, "fix");
    e->suppressed = Str(o, schema::kKeySuppressed);
    e->fix_library = Str(o, "held_by");
    object fs;
    if (e->fix_library.empty() && Member(o, "fork_support", &x) &&
        x.get_object().get(fs) == simdjson::SUCCESS)
      e->fix_library = Str(fs, "by");
    e->stack = StackAt(o, "stack", proc, p, state);
    simdjson::dom::array a;
    if (Member(o, "reasons", &x) && x.get_array().get(a) == simdjson::SUCCESS) {
      for (element r : a) {
        std::string_view v;
        if (r.get_string().get(v) == simdjson::SUCCESS && e->reasons.size() < 16)
          e->reasons.emplace_back(v);
      }
    }
    if (e->action == "failed" && Member(o, "errno", &x)) {
      std::string_view v;
      if (x.type() == element_type::INT64)
        e->errno_text = std::to_string(x.get_int64().value_unsafe());
      else if (x.get_string().get(v) == simdjson::SUCCESS)
        e->errno_text = std::string(v);
    }
    object init;
    if (Member(o, "init", &x) && x.get_object().get(init) == simdjson::SUCCESS) {
      e->has_init = true;
      e->init_age_ms = Int(init, "age_ms", -1);
      e->init_call = Str(init, "call", "?");
      e->init_device = Str(init, "device");
      e->init_stack = StackAt(init, "stack", proc, p, state);
    }
    if (Member(o, "ranges", &x) && x.get_array().get(a) == simdjson::SUCCESS) {
      for (element r : a) {
        object ro;
        if (r.get_object().get(ro) != simdjson::SUCCESS) continue;
        ++e->ranges;
        e->range_bytes += std::max<int64_t>(0, Int(ro, "len", 0));
        if (Bool(ro, "dontfork", false)) ++e->dontfork_ranges;
      }
    }
    e->threads = Int(o, "threads", 0);
    bool cof = false;
    if (Member(o, "kernel_cof", &x) && x.get_bool().get(cof) == simdjson::SUCCESS)
      e->kernel_cof = cof;
  } else if (t == "fork_child") {
    e->child_pid = Int(o, "child_pid", -1);
  } else if (t == "spawn") {
    e->call = Str(o, "call");
    e->child_pid = Int(o, "child_pid", -1);
  } else if (t == "child_segv") {
    e->signal = static_cast<int>(Int(o, "signal", 11));
    e->addr = AddressAt(o, "addr");
    object rg;
    if (Member(o, "range", &x) && x.get_object().get(rg) == simdjson::SUCCESS) {
      e->range_addr = AddressAt(rg, "addr");
      e->range_len = AddressAt(rg, "len");
    }
    e->call = Str(o, "call");
    e->stack = StackAt(o, "reg_stack", proc, p, state);
  } else if (t == "child_exec") {
    e->call = Str(o, "path");
  } else if (t == "note") {
    e->text = Str(o, "text");
  }
}

void Count(ProcessSummary* s, const std::string& type) {
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
ProcIt FindProcess(object v, int64_t pid, FileState* state, std::string_view file_name,
                   LogSet* out) {
  std::string_view host = "?";
  element he;
  if (Member(v, "host", &he) && he.get_string().get(host) != simdjson::SUCCESS) host = "?";
  // Two jobs' processes on one host may have the same pid: never one process.
  std::string job = Str(v, "job");
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
    it = state->by_proc.emplace(key, FileState::Proc{out->processes.size() - 1, {}}).first;
  }
  return it;
}

// ppid, prog, rank, local_rank, job: from a /1 line or a /2 header.
void FillIdentity(object v, ProcessLog* pp) {
  ProcessLog& p = *pp;
  if (p.ppid <= 0) p.ppid = Int(v, "ppid", -1);
  if (p.prog.empty()) p.prog = Str(v, "prog");
  if (!p.rank) {
    element r;
    if (Member(v, "rank", &r) && r.type() == element_type::INT64)
      p.rank = r.get_int64().value_unsafe();
  }
  if (!p.local_rank) {
    element r;
    if (Member(v, "local_rank", &r) && r.type() == element_type::INT64)
      p.local_rank = r.get_int64().value_unsafe();
  }
  if (p.job.empty()) p.job = Str(v, "job");
}

// Folds one event of process `it` into the set (both schemas).
void UseEvent(object v, std::string type, int64_t ts, int lineno, FileNotes* notes,
              FileState* state, ProcIt it, LogSet* out) {
  ProcessLog& p = out->processes[it->second.index];
  if (ts > 0 && (p.first_ts_ns == 0 || ts < p.first_ts_ns)) p.first_ts_ns = ts;
  ProcessSummary& sum = p.summary;
  Count(&sum, type);
  ++sum.lines;
  sum.last_ts_ns = std::max(sum.last_ts_ns, ts);
  ++out->lines_used;
  if (CountOnly(type)) {
    if (type == "mr_register") {
      ++sum.registrations;
      int64_t len = Int(v, "len", 0);
      element mr;
      simdjson::dom::array a;
      element le;
      // /2: "mr":[addr,len,access,handle]
      if (Member(v, schema::kKeyMr, &mr) && mr.get_array().get(a) == simdjson::SUCCESS &&
          a.at(1).get(le) == simdjson::SUCCESS)
        len = IntOf(le).value_or(0);
      sum.registered_bytes += std::max<int64_t>(0, len);
      if (sum.first_registrations.size() < ProcessSummary::kMaxRegistrationSamples)
        sum.first_registrations.push_back({ts, Int(v, "tid", state->v2 ? p.pid : 0),
                                           std::max<int64_t>(0, len), Bool(v, "dontfork", false),
                                           Str(v, "call", state->v2 ? "ibv_reg_mr" : "")});
    }
    // /2: a registration's stack id must name a record already read (cheap: one lookup).
    element se;
    if (state->v2 && Member(v, schema::kKeyStack, &se) && se.type() == element_type::INT64 &&
        !state->stacks.count(se.get_int64().value_unsafe()))
      notes->Add(lineno, "stack id used before or without its record",
                 "stack " + std::to_string(se.get_int64().value_unsafe()) +
                     " (the event is counted without it)");
    return;
  }
  if (type == "rdma_init" && sum.rdma_init_ts_ns == 0) sum.rdma_init_ts_ns = ts;
  Event e;
  e.type = std::move(type);
  e.ts_ns = ts;
  e.seq = Int(v, "seq", -1);
  e.tid = Int(v, "tid", state->v2 ? p.pid : 0);
  e.line = lineno;
  state->notes = notes;
  state->lineno = lineno;
  DecodeEvent(v, &it->second, &p, &e, state);
  p.events.push_back(std::move(e));
}

// A /2 file's header: the process every later line of the file belongs to (until another
// header: a file of concatenated logs). Its module and stack tables start empty.
void ParseV2Header(object v, int lineno, FileNotes* notes, FileState* state,
                   std::string_view file_name, LogSet* out) {
  if (Str(v, "event") != schema::kHeader) {
    notes->Add(lineno, "a forkguard.event/2 line with \"schema\" that is not a header, skipped",
               "");
    return;
  }
  int64_t pid = Int(v, "pid", -1);
  if (pid <= 0) {
    notes->Add(lineno, "no valid \"pid\" in the header, its lines are skipped", "");
    state->v2 = false;
    return;
  }
  auto it = FindProcess(v, pid, state, file_name, out);
  state->last = it;
  FillIdentity(v, &out->processes[it->second.index]);
  state->v2 = true;
  state->v2_start_ns = Int(v, schema::kKeyStartNs, 0);
  state->v2_proc = it;
  state->modules.clear();
  state->stacks.clear();
  ++out->lines_used;
}

// A /2 line after the header: a module or stack record, or an event.
void ParseV2Line(object v, int lineno, FileNotes* notes, FileState* state, LogSet* out) {
  std::string type = Str(v, "event");
  if (type.empty()) {
    notes->Add(lineno, "no \"event\" field, skipped", "");
    return;
  }
  ProcIt it = state->v2_proc;
  ProcessLog& p = out->processes[it->second.index];
  state->notes = notes;
  state->lineno = lineno;
  if (type == schema::kModule || type == schema::kStackRecord) {
    element ie;
    std::optional<int64_t> id;
    if (Member(v, "id", &ie)) id = IntOf(ie);
    if (!id || *id < 0) {
      notes->Add(lineno, "a " + type + " record without a valid id, skipped", "");
      return;
    }
    if (type == schema::kModule) {
      if (state->modules.count(*id)) {
        notes->Add(lineno, "duplicate module id", std::to_string(*id) + " (the first kept)");
        return;
      }
      state->modules[*id] = {Str(v, "path"), Str(v, schema::kKeyBuildId)};
    } else {
      if (state->stacks.count(*id)) {
        notes->Add(lineno, "duplicate stack id", std::to_string(*id) + " (the first kept)");
        return;
      }
      element fe;
      if (!Member(v, schema::kKeyFrames, &fe)) {
        notes->Add(lineno, "a stack record without frames, skipped", std::to_string(*id));
        return;
      }
      state->stacks[*id] = InternDecoded(DecodeV2Frames(fe, state, *id), &it->second, &p);
    }
    ++out->lines_used;
    return;
  }
  int64_t ts = state->v2_start_ns + Int(v, schema::kKeyTs, 0);
  UseEvent(v, std::move(type), ts, lineno, notes, state, it, out);
}

// `line` is followed by at least simdjson::SIMDJSON_PADDING readable bytes.
void ParseLine(std::string_view line, int lineno, bool last_unterminated, FileNotes* notes,
               FileState* state, std::string_view file_name, LogSet* out) {
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
  object v;
  if (root.get_object().get(v) != simdjson::SUCCESS) {
    notes->Add(lineno, "not a JSON object", "");
    return;
  }
  element se;
  std::string_view schema;
  bool has_schema = Member(v, "schema", &se) && se.get_string().get(schema) == simdjson::SUCCESS;
  if (!has_schema) {
    if (state->v2) {  // a /2 line: its process is the file's header's
      ParseV2Line(v, lineno, notes, state, out);
      return;
    }
    notes->Add(lineno, "no \"schema\" field, not a forkguard event", "");
    return;
  }
  int major = schema == kEventSchema     ? 1
              : schema == kEventSchemaV2 ? 2
                                         : SchemaMajor(std::string(schema));
  if (major == 2) {
    ParseV2Header(v, lineno, notes, state, file_name, out);
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
  std::string type = Str(v, "event");
  if (type.empty()) {
    notes->Add(lineno, "no \"event\" field, skipped", "");
    return;
  }
  int64_t pid = Int(v, "pid", -1);
  if (pid <= 0) {
    notes->Add(lineno, "no valid \"pid\", skipped", "");
    return;
  }
  auto it = FindProcess(v, pid, state, file_name, out);
  state->last = it;
  ProcessLog& p = out->processes[it->second.index];
  FillIdentity(v, &p);
  UseEvent(v, std::move(type), Int(v, "ts_ns", 0), lineno, notes, state, it, out);
}

// Splits `buf[0, size)` into lines and parses the complete ones; returns
// where the unfinished tail starts. `buf` has SIMDJSON_PADDING bytes after size.
size_t ParseLines(const char* buf, size_t size, bool at_eof, int* lineno, FileNotes* notes,
                  FileState* state, std::string_view file_name, LogSet* out) {
  size_t pos = 0;
  while (pos < size) {
    const void* nl = memchr(buf + pos, '\n', size - pos);
    if (!nl && !at_eof) break;
    size_t end = nl ? static_cast<size_t>(static_cast<const char*>(nl) - buf) : size;
    ++*lineno;
    ParseLine(std::string_view(buf + pos, end - pos), *lineno, !nl, notes, state, file_name, out);
    pos = nl ? end + 1 : size;
  }
  return pos;
}

// Streams `fd` through a fixed buffer: memory is one chunk plus the longest
// line, whatever the file's size.
void ReadStream(int fd, const std::string& path, LogSet* out) {
  FileNotes notes(path, out);
  FileState state;
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
    size_t done =
        start + ParseLines(buf + start, have - start, eof, &lineno, &notes, &state, path, out);
    if (eof) break;
    memmove(buf, buf + done, have - done);
    have -= done;
    if (have > kMaxLineBytes) {  // a line longer than any the reader accepts
      overlong = have;
      have = 0;
    }
  }
  if (total == 0) out->notes.push_back({path, "empty file"});
}

void ReadFile(const std::string& path, LogSet* out) {
  bool is_stdin = path == "-";  // `forkguard report -`: a stream of lines
  int fd = is_stdin ? dup(STDIN_FILENO)
                    : open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    out->notes.push_back({path, std::string("cannot open: ") + strerror(errno)});
    return;
  }
  struct stat st;
  if (!is_stdin && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
    out->notes.push_back({path, "not a regular file, skipped"});
    close(fd);
    return;
  }
  ++out->files_read;
  ReadStream(fd, path, out);
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

// Symlinks are followed, to files and to directories (collected logs are often links);
// each directory and each file is taken once, so a link loop ends.
void Walk(const std::string& dir, int depth, int* found, std::vector<Item>* items, Seen* seen) {
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
    if (stat(p.c_str(), &st) != 0) {
      if (IsLogName(n)) items->push_back({"", {p, std::string("cannot read: ") + strerror(errno)}});
      continue;
    }
    if (S_ISDIR(st.st_mode)) {
      if (depth < 8 && seen->First(seen->dirs, st)) Walk(p, depth + 1, found, items, seen);
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

const Stack& ProcessLog::StackAt(int id) const {
  static const Stack kEmpty;
  if (id < 0 || static_cast<size_t>(id) >= stacks.size()) return kEmpty;
  return stacks[static_cast<size_t>(id)];
}

std::optional<uint64_t> ParseAddress(const JsonValue* v) {
  if (!v) return std::nullopt;
  if (v->is_int() && v->int_value() >= 0) return static_cast<uint64_t>(v->int_value());
  if (!v->is_string()) return std::nullopt;
  return ParseAddressText(v->string_value());
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
  ParseLines(buf.data(), text.size(), true, &lineno, &notes, &state, file_name, out);
}

void ReadLogs(const std::vector<std::string>& paths, LogSet* out, int threads) {
  std::vector<Item> items;
  Seen seen;
  for (const auto& p : paths) {
    if (p == "-") {
      items.push_back({p, {}});
      continue;
    }
    struct stat st;
    if (stat(p.c_str(), &st) != 0) {
      items.push_back({"", {p, std::string("cannot read: ") + strerror(errno)}});
      continue;
    }
    if (S_ISDIR(st.st_mode)) {
      int found = 0;
      seen.First(seen.dirs, st);
      Walk(p, 0, &found, &items, &seen);
      if (found == 0) items.push_back({"", {p, "no event logs (*.jsonl) in this directory"}});
    } else if (!S_ISREG(st.st_mode) || seen.First(seen.files, st)) {
      items.push_back({p, {}});
    }
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
        ReadFile(items[i].file, &parts[i]);
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
}

}  // namespace forkguard::cli
