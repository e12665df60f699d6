// Folding a log's events into processes: each line's process, its events kept or counted,
// its stacks interned, its forks tallied.
#include "cli/process_fold.h"

#include <algorithm>
#include <map>
#include <optional>
#include <unordered_map>
#include <utility>

#include "cli/event_decode.h"
#include "cli/event_fields.h"
#include "cli/log_lines.h"

namespace forkguard::cli {
namespace {

using namespace reader_names;

// The per-file state: processes met in this file and their stack tables.
struct FileState {
  struct Proc {
    size_t index = 0;  // into out->processes
    std::unordered_map<std::string, int> stack_ids;
    ForkTally forks;
  };
  std::map<std::pair<std::string, int64_t>, Proc> by_proc;
  std::map<std::pair<std::string, int64_t>, Proc>::iterator last = by_proc.end();
  // forkguard.event/2: the file's decoder (header, modules, stack records), the header's
  // process, and the index in ProcessLog::stacks of each stack record an event used (-1:
  // its frames did not decode).
  V2Decoder v2;
  std::map<std::pair<std::string, int64_t>, Proc>::iterator v2_proc = by_proc.end();
  std::unordered_map<int64_t, int> v2_stack_index;
  // (host, pid) of every process with a log of its own; null: unknown, keep every child.
  const WithLogs* with_logs = nullptr;
  // Storage reused from fork line to fork line (forks are tallied, not kept).
  Fork fork;
};

// The end of a file: each process's newest forks join its sample, in log order.
void FinishFile(FileState* state, LogSet* out) {
  for (auto& [key, proc] : state->by_proc) FinishForks(&proc.forks, &out->processes[proc.index]);
}

int InternDecoded(Stack st, FileState::Proc* proc, ProcessLog* p) {
  std::string key = StackIdentity(st);
  auto [it, fresh] = proc->stack_ids.emplace(std::move(key), static_cast<int>(p->stacks.size()));
  if (fresh) p->stacks.push_back(std::move(st));
  return it->second;
}

// The stacks of the line being decoded (of process `proc`, line `lineno`), interned in
// p->stacks.
struct FoldStacks final : StackIndexer {
  FileState* state;
  FileState::Proc* proc;
  ProcessLog* p;
  FileNotes* notes;
  int lineno;

  FoldStacks(FileState* s, FileState::Proc* pr, ProcessLog* pl, FileNotes* n, int l)
      : state(s), proc(pr), p(pl), notes(n), lineno(l) {}

  // The index of /2 stack record `id` in p->stacks, decoding it on first use; -1 when
  // unknown.
  int V2Stack(int64_t id) {
    auto it = state->v2_stack_index.find(id);
    if (it != state->v2_stack_index.end()) return it->second;
    if (!state->v2.HasStack(id)) return -1;
    std::optional<Stack> frames = state->v2.Frames(id, lineno, notes);
    int index = frames ? InternDecoded(std::move(*frames), proc, p) : -1;
    state->v2_stack_index[id] = index;
    return index;
  }

  // A stack value: an array (inline frames, /1 and /2) or, in /2, the id of a stack record.
  int Index(element e) override {
    if (state->v2.on && (e.type() == element_type::INT64 || e.type() == element_type::UINT64)) {
      int64_t id = IntOf(e).value_or(-1);
      if (state->v2.HasStack(id)) return V2Stack(id);
      notes->Add(lineno, "stack id used before or without its record",
                 "stack " + std::to_string(id) + " (the event is kept without it)");
      return -1;
    }
    return InternDecoded(DecodeStack(e), proc, p);
  }
};

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
  if (Str(v, Key::kSource) == schema::kSourceWatcher) p.watcher = true;
  if (p.ns_pid <= 0) p.ns_pid = Int(v, Key::kNsPid, -1);
  if (p.ns_host.empty()) p.ns_host = Str(v, Key::kNsHost);
}

// Folds one event of process `it` into the set (both schemas).
void UseEvent(const Fields& v, std::string_view type, EventType kind, int64_t ts, int lineno,
              FileNotes* notes, FileState* state, ProcIt it, LogSet* out) {
  ProcessLog& p = out->processes[it->second.index];
  if (ts > 0 && (p.first_ts_ns == 0 || ts < p.first_ts_ns)) p.first_ts_ns = ts;
  ProcessSummary& sum = p.summary;
  sum.CountType(type, 1);
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
  Event e;
  e.type.assign(type);
  e.kind = kind;
  e.ts_ns = ts;
  e.seq = Int(v, Key::kSeq, -1);
  e.tid = Int(v, Key::kTid, state->v2.on ? p.pid : 0);
  e.line = lineno;
  FoldStacks stacks(state, &it->second, &p, notes, lineno);
  // A fork is tallied, not kept: its record is decoded into storage reused from fork to fork.
  if (kind == EventType::kFork) {
    DecodeFork(v, &stacks, notes, lineno, &state->fork);
    TallyFork(e, state->fork, &it->second.forks, &p);
    return;
  }
  DecodeEvent(v, &stacks, &e);
  if (const auto* child = e.As<ForkChild>()) {  // tallied too: it names its fork's child
    TallyForkChild(child->child_pid, state->with_logs, &it->second.forks, &p);
    return;
  }
  p.events.push_back(std::move(e));
}

// Folds the lines V2Decoder and ParseLine yield into processes (ParseLogText, ReadLogs).
struct ReportSink final : LineSink {
  FileState* state;
  std::string_view file_name;
  LogSet* out;

  ReportSink(FileState* s, std::string_view name, LogSet* o)
      : LineSink(&s->v2), state(s), file_name(name), out(o) {}

  // A /2 header (`pid` valid): the process every later line of the file belongs to.
  void Header(const Fields& v, std::string_view /*line*/, int64_t pid, int /*lineno*/) override {
    auto it = FindProcess(v, pid, state, file_name, out);
    state->last = it;
    FillIdentity(v, &out->processes[it->second.index]);
    state->v2_proc = it;
    state->v2_stack_index.clear();
    ++out->lines_used;
    ++out->processes[it->second.index].summary.lines;
  }

  // A /2 module or stack record the decoder kept.
  void Record(EventType kind, int64_t id) override {
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
               int lineno, FileNotes* notes) override {
    auto it = FindProcess(v, pid, state, file_name, out);
    state->last = it;
    FillIdentity(v, &out->processes[it->second.index]);
    UseEvent(v, type, EventTypeOf(type), Int(v, Key::kTsNs, 0), lineno, notes, state, it, out);
  }

  // A /2 event (`ts`: absolute).
  void EventV2(const Fields& v, std::string_view /*line*/, std::string_view type, EventType kind,
               int64_t ts, int lineno, FileNotes* notes) override {
    UseEvent(v, type, kind, ts, lineno, notes, state, state->v2_proc, out);
  }
};
}  // namespace

void ParseLogText(std::string_view file_name, std::string_view text, LogSet* out) {
  FileNotes notes(file_name, out);
  FileState state;
  ReportSink sink(&state, file_name, out);
  ParseText(text, &notes, &sink);
  FinishFile(&state, out);
}

void FoldStream(int fd, const std::string& path, const WithLogs* with_logs, LogSet* out) {
  FileNotes notes(path, out);
  FileState state;
  state.with_logs = with_logs;
  ReportSink sink(&state, path, out);
  size_t total = ParseStream(fd, &notes, &sink);
  FinishFile(&state, out);
  if (total == 0) out->notes.push_back({path, "empty file"});
}

}  // namespace forkguard::cli
