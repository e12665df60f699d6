// What one event means: its record type's typed fields decoded into that type's struct
// (cli/process_log.h: ProcessStart, Fork, ...), its stacks into Frames, fix mode's `fixed`
// ranges into the fork's FixTally. Defaults when a field is
// absent or mistyped; a bad field never drops the line.
#pragma once

#include <string>

#include <simdjson.h>

#include "cli/event_fields.h"
#include "cli/log_lines.h"
#include "cli/process_log.h"

namespace forkguard::cli {

// Where DecodeEvent puts the stacks an event names: the index of a stack value (inline
// frames, or a /2 stack record's id) among its process's stacks, -1 when it has none.
class StackIndexer {
 public:
  virtual int Index(simdjson::dom::element v) = 0;

 protected:
  ~StackIndexer() = default;
};

// A stack from its JSON array (tolerant: bad frames are skipped).
Stack DecodeStack(simdjson::dom::element v);

// Identity of a decoded stack within a process (every field that renders).
std::string StackIdentity(const Stack& s);

// The record of `e->kind` from `o` (the common fields are the caller's): e->record holds
// the type's struct, or nothing for a type without fields the report reads. Not for forks
// (DecodeFork).
void DecodeEvent(const Fields& o, StackIndexer* stacks, Event* e);

// A fork line's record from `o` into `f`, reset first (its reasons keep their storage:
// forks are tallied, their record reused from line to line); `notes` (may be null) gets the
// notes about line `lineno`'s values that are read as absent.
void DecodeFork(const Fields& o, StackIndexer* stacks, FileNotes* notes, int lineno, Fork* f);

}  // namespace forkguard::cli
