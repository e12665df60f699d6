// What the reader's tests ask of a LogSet, and the logs they share.
#pragma once

#include <cstdint>
#include <string>

#include "cli/process_log.h"

namespace forkguard::cli::testdata {

// The path of cli/testdata/corpus/NAME (a test's data).
std::string Corpus(const std::string& name);

// That file read as the report reads logs (ReadLogs).
LogSet ReadCorpus(const std::string& name);

// Whether a note's location ends with `suffix` and its text contains `text`.
bool HasNote(const LogSet& l, const std::string& suffix, const std::string& text);

// Events of `type`; fork lines are tallied per site by the reader, not kept as events.
int64_t CountEvents(const LogSet& l, const std::string& type);

// Every text format of the report of `l`, one after the other (they must render, whatever the
// input).
std::string FormatsOf(const LogSet& l);

// A forkguard.event/2 process: the header, a module, a stack, an init and a registration.
inline constexpr char kV2Process[] =
    R"({"schema":"forkguard.event/2","event":"header","host":"h","pid":5,"ppid":1,"prog":"p","rank":2,"local_rank":0,"job":"j","start_ns":1000000})"
    "\n"
    R"({"event":"module","id":0,"path":"/lib/x.so","base":"0x7f0000000000","build_id":"abcd"})"
    "\n"
    R"({"event":"stack","id":0,"frames":[[0,4660],[-1,99],{"py":{"file":"t.py","line":3,"func":"main"}}]})"
    "\n"
    R"({"event":"rdma_init","ts":5,"seq":0,"call":"ibv_open_device","device":"d","stack":0})"
    "\n"
    R"({"event":"mr_register","ts":6,"seq":1,"mr":[4096,8192,1,77],"stack":0})"
    "\n";

}  // namespace forkguard::cli::testdata
