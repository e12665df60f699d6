#include "formats/fix_text.h"

#include <iterator>

#include "names/name_table.h"

namespace forkguard {
namespace {

constexpr char kFixRuleNames[][21] = {
    "library-cache",        "ucx-fork-init", "preexec-fn",  "dataloader",
    "multiprocessing-fork", "mpi-init",      "python-fork", "c-program"};
static_assert(std::size(kFixRuleNames) == CountThrough(FixRule::kCProgram));

}  // namespace

const char* FixRuleName(FixRule rule) { return NameOf(kFixRuleNames, rule, "?"); }

bool FixRuleFromName(const char* name, FixRule* rule) { return ValueOf(kFixRuleNames, name, rule); }

void FormatFix(TextBuffer& out, FixRule rule, const char* library) {
  const char* lib = library != nullptr && library[0] != '\0' ? library : nullptr;
  out.Str("  fix: ");
  switch (rule) {
    case FixRule::kLibraryCache:
      out.Str("nothing left for the program to release: ").Str(lib != nullptr ? lib : "librdmacm");
      out.Str(
          " keeps its device context until the process exits. The child is fine as long as it "
          "does not call librdmacm (it would reuse the parent's cached context); to use RDMA "
          "in the child, exec a new program (posix_spawn) or fork before the first rdma_cm "
          "call\n");
      return;
    case FixRule::kUcxForkInit:
      out.Str("UCX turned fork support on (ibv_fork_init");
      if (lib != nullptr) out.Str(" from ").Str(lib);
      out.Str(
          ") and this kernel copies pinned pages on fork, so it is not needed: run with "
          "UCX_IB_FORK_INIT=n (registrations are then not MADV_DONTFORK and the child can "
          "touch them)\n");
      return;
    case FixRule::kPreexecFn:
      out.Str(
          "preexec_fn makes CPython fork for real (without it subprocess uses vfork, which "
          "shares nothing): drop it - start_new_session=True instead of preexec_fn=os.setsid, "
          "process_group=0 instead of os.setpgrp - or keep the preexec_fn from touching "
          "registered memory\n");
      return;
    case FixRule::kDataLoader:
      out.Str(
          "create the DataLoader (persistent_workers=True) before RDMA init, or use "
          "multiprocessing_context='spawn' or 'forkserver' (DataLoader / multiprocessing)\n");
      return;
    case FixRule::kMultiprocessingFork:
      out.Str(
          "use the 'forkserver' start method (multiprocessing.get_context('forkserver')) and "
          "start the server before RDMA init (multiprocessing.forkserver.ensure_running()), "
          "without set_forkserver_preload() of a module that initializes RDMA; or 'spawn'\n");
      return;
    case FixRule::kMpiInit:
      out.Str(
          "RDMA was initialized inside MPI_Init: fork the workers before MPI_Init, or start "
          "them with spawn (posix_spawn, MPI_Comm_spawn)\n");
      return;
    case FixRule::kPythonFork:
      out.Str(
          "call os.fork() before RDMA init (fork first, then open the device), or start the "
          "child with os.posix_spawn/subprocess or a multiprocessing 'forkserver' started "
          "before RDMA init\n");
      return;
    case FixRule::kCProgram:
      out.Str(
          "fork first, then open the device (create workers before RDMA init), or start the "
          "child with posix_spawn\n");
      return;
  }
}

}  // namespace forkguard
