// The names and errnos of a fork's entry points (fork_report.h), for the message, the event
// log and the decision alike.
#include "shim/messages/fork_report.h"

#include <errno.h>

#include <cstddef>

#include "formats/event_schema.h"

namespace forkguard {

const char* ForkViaName(ForkVia via) {
  // Indexed by ForkVia (the event log's `via` values, in the same order). An array of arrays,
  // not of pointers: no relocations to apply at load.
  static constexpr char kNames[][8] = {
#define FORKGUARD_X(id, name) name,
      FORKGUARD_FORK_ENTRIES(FORKGUARD_X)
#undef FORKGUARD_X
  };
  static_assert(static_cast<size_t>(ForkVia::kForkpty) + 1 == sizeof(kNames) / sizeof(kNames[0]));
  auto i = static_cast<size_t>(via);
  return i < sizeof(kNames) / sizeof(kNames[0]) ? kNames[i] : kNames[0];
}

int FailErrno(ForkVia via) {
  return via == ForkVia::kUnderscoreFork || via == ForkVia::kForkpty ? ENOMEM : EPERM;
}

const char* FailErrnoName(ForkVia via) { return FailErrno(via) == ENOMEM ? "ENOMEM" : "EPERM"; }

}  // namespace forkguard
