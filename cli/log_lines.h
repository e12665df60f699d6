// The lines of an event log: a stream or a text cut into lines, each parsed on its own with
// simdjson and sorted by schema (`/1` lines; a `/2` header, its module and stack records and
// its events), anything unusable a note naming its line. What the lines yield goes to a
// LineSink: the report folds it into processes (cli/process_fold.h), the test support writes
// it out as self-contained events (tests/support/event_records.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include <simdjson.h>

#include "cli/event_fields.h"
#include "cli/process_log.h"
#include "formats/event_schema.h"

namespace forkguard::cli {

// Longest line the reader accepts; the shim writes lines of a few KiB.
inline constexpr size_t kMaxLineBytes = 1 << 20;
// Files stream through a buffer of this many bytes (plus the longest line).
inline constexpr size_t kChunkBytes = size_t{1} << 20;

// Collects notes for one file, naming the first few lines of each kind of
// problem and counting the rest, so a file of junk gives a short report.
class FileNotes {
 public:
  FileNotes(std::string_view file, LogSet* out) : file_(file), out_(out) {}
  ~FileNotes();
  // A line skipped.
  void Add(int line, const std::string& kind, const std::string& detail);
  // A problem in a line that is still read (a value read as absent).
  void Note(int line, const std::string& kind, const std::string& detail);
  // A note about the whole file.
  void FileNote(std::string text) { out_->notes.push_back({file_, std::move(text)}); }

 private:
  std::string file_;
  LogSet* out_;
  std::map<std::string, int> seen_;
  std::map<std::string, int> extra_;
};

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
  bool Record(const Fields& v, schema::EventType kind, std::string_view type, int lineno,
              FileNotes* notes, int64_t* id_out);

  // The frames of stack record `id`; nullopt when there is none of that id (or its frames
  // are not JSON).
  std::optional<Stack> Frames(int64_t id, int lineno, FileNotes* notes) const;

  // A stack record's frames: [module, off] pairs (module -1: off is a raw address) and
  // Python frames; a module id not (yet) met gets a note and raw offsets.
  Stack DecodeFrames(simdjson::dom::element v, int64_t id, int lineno, FileNotes* notes) const;
};

// What the lines of a file yield, in order. `decoder` holds the /2 tables of the file.
class LineSink {
 public:
  explicit LineSink(V2Decoder* decoder) : decoder_(decoder) {}
  V2Decoder* decoder() const { return decoder_; }

  // A /2 header (`pid` valid): the process every later line of the file belongs to.
  virtual void Header(const Fields& v, std::string_view line, int64_t pid, int lineno) = 0;
  // A /2 module or stack record the decoder kept.
  virtual void Record(schema::EventType kind, int64_t id) = 0;
  // A /1 line of process `pid`.
  virtual void EventV1(const Fields& v, std::string_view line, std::string_view type, int64_t pid,
                       int lineno, FileNotes* notes) = 0;
  // A /2 event (`ts`: absolute).
  virtual void EventV2(const Fields& v, std::string_view line, std::string_view type,
                       schema::EventType kind, int64_t ts, int lineno, FileNotes* notes) = 0;

 protected:
  ~LineSink() = default;

 private:
  V2Decoder* decoder_;
};

// Splits `buf[0, size)` into lines and parses the complete ones (at_eof: the unterminated
// tail too); returns where the unfinished tail starts. `buf` has
// simdjson::SIMDJSON_PADDING readable bytes after size.
size_t ParseLines(const char* buf, size_t size, bool at_eof, int* lineno, FileNotes* notes,
                  LineSink* sink);

// Every line of `text`.
void ParseText(std::string_view text, FileNotes* notes, LineSink* sink);

// Every line of `fd`, streamed through a fixed buffer: memory is one chunk plus the longest
// line, whatever the file's size. Returns the bytes read.
size_t ParseStream(int fd, FileNotes* notes, LineSink* sink);

}  // namespace forkguard::cli
