// The human message printed for a hazardous fork (phrases are a contract: tests and users
// grep for them; see shim/README.md).
#ifndef FORKGUARD_SHIM_MESSAGE_H_
#define FORKGUARD_SHIM_MESSAGE_H_

#include <sys/types.h>

#include "shim/config.h"
#include "shim/proc_facts.h"
#include "shim/python_stack.h"
#include "shim/stack.h"
#include "shim/state.h"
#include "shim/text_buffer.h"
#include "shim/verdict.h"

namespace forkguard {

struct ProcessIdentity {
  pid_t pid = 0;
  const char* prog = "";
  const char* host = "";
  long rank = -1;  // -1: unknown
};

enum class ForkVia { kFork, kAtfork };

struct ForkReport {
  ProcessIdentity who;
  ForkVerdict verdict;
  const StateSnapshot* snap = nullptr;
  const bool* mr_dontfork = nullptr;  // per snap->mrs
  const Vma* dc_vmas = nullptr;       // for unattributed ranges
  int dc_count = 0;
  const RawStack* fork_stack = nullptr;
  const PythonStack* fork_py = nullptr;  // may be null or empty
  int64_t now_mono_ns = 0;
  Mode mode = Mode::kWarn;
  ForkVia via = ForkVia::kFork;
  int threads = -1;
  int map_count = -1;
  long max_map_count = -1;
  KernelCofFact cof;
};

// Formats the whole multi-line message (ends with '\n'). No malloc.
void FormatHazardMessage(TextBuffer& out, const ForkReport& r, bool demangle);

// Appends the frames of `stack` as "    #i func+0xoff (obj+0xoff)\n" lines.
void FormatStackLines(TextBuffer& out, const RawStack& stack, const char* indent, bool demangle);
// Appends a Python traceback ("Python stack (most recent call last):" + File lines), each
// line prefixed with `indent`; nothing for an empty stack.
void FormatPythonLines(TextBuffer& out, const PythonStack& py, const char* indent);

}  // namespace forkguard

#endif  // FORKGUARD_SHIM_MESSAGE_H_
