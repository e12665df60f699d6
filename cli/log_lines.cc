// The lines of an event log: framing, schemas, bounds, and the /2 module and stack tables.
#include "cli/log_lines.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

namespace forkguard::cli {
namespace {

using namespace reader_names;

constexpr std::string_view kEventSchema = schema::kEventV1;
constexpr std::string_view kEventSchemaV2 = schema::kEventV2;

// Per file and kind of problem, this many notes name their line; the rest are counted.
constexpr int kNotesPerKind = 3;

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
void ParseV2Header(const Fields& v, std::string_view line, int lineno, FileNotes* notes,
                   LineSink* sink) {
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
void ParseV2Line(const Fields& v, std::string_view line, int lineno, FileNotes* notes,
                 LineSink* sink) {
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
void ParseLine(std::string_view line, int lineno, bool last_unterminated, FileNotes* notes,
               LineSink* sink) {
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

}  // namespace

FileNotes::~FileNotes() {
  for (const auto& [kind, n] : extra_)
    if (n > 0)
      out_->notes.push_back({file_, "… and " + std::to_string(n) + " more line(s): " + kind});
}

void FileNotes::Add(int line, const std::string& kind, const std::string& detail) {
  ++out_->lines_skipped;
  Note(line, kind, detail);
}

void FileNotes::Note(int line, const std::string& kind, const std::string& detail) {
  int& seen = seen_[kind];
  if (seen++ < kNotesPerKind) {
    out_->notes.push_back(
        {file_ + ":" + std::to_string(line), kind + (detail.empty() ? "" : ": " + detail)});
  } else {
    ++extra_[kind];
  }
}

bool V2Decoder::Record(const Fields& v, EventType kind, std::string_view type, int lineno,
                       FileNotes* notes, int64_t* id_out) {
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
      if (f.get_array().get(pair) == simdjson::SUCCESS && pair.at(0).get(me) == simdjson::SUCCESS) {
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

std::optional<Stack> V2Decoder::Frames(int64_t id, int lineno, FileNotes* notes) const {
  if (auto early = early_stacks.find(id); early != early_stacks.end()) return early->second;
  auto raw = raw_stacks.find(id);
  if (raw == raw_stacks.end()) return std::nullopt;
  // A parser of its own: the line being decoded lives in LineParser()'s document.
  thread_local simdjson::dom::parser parser;
  element fe;
  if (parser.parse(raw->second).get(fe) != simdjson::SUCCESS) return std::nullopt;
  return DecodeFrames(fe, id, lineno, notes);
}

Stack V2Decoder::DecodeFrames(element v, int64_t id, int lineno, FileNotes* notes) const {
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

size_t ParseLines(const char* buf, size_t size, bool at_eof, int* lineno, FileNotes* notes,
                  LineSink* sink) {
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

void ParseText(std::string_view text, FileNotes* notes, LineSink* sink) {
  std::string buf(text);  // simdjson reads a few bytes past each line
  buf.append(simdjson::SIMDJSON_PADDING, '\0');
  int lineno = 0;
  ParseLines(buf.data(), text.size(), true, &lineno, notes, sink);
}

size_t ParseStream(int fd, FileNotes* notes, LineSink* sink) {
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
      notes->FileNote(std::string("read error: ") + strerror(errno) + " (using what was read)");
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
        notes->Add(lineno, "line too long", std::to_string(overlong) + " bytes, skipped");
        overlong = 0;
        start = nl ? end + 1 : have;
      } else {
        have = 0;
        continue;
      }
    }
    size_t done = start + ParseLines(buf + start, have - start, eof, &lineno, notes, sink);
    if (eof) break;
    memmove(buf, buf + done, have - done);
    have -= done;
    if (have > kMaxLineBytes) {  // a line longer than any the reader accepts
      overlong = have;
      have = 0;
    }
  }
  return total;
}

}  // namespace forkguard::cli
