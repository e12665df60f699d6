// forkguard.event/2: the names of the log's records, events and keys, in one place for the
// shim's writers (shim/log/event_log.cc, shim/log/event_writer.cc, shim/child/child.cc,
// shim/hooks/process_init.cc), the CLI's decoder (cli/event_log.cc) and the test job generator
// (cli/testdata/job_generator*).
// X-macro lists: each name is written once here, and the enums, the constants and the
// tables below come from the lists. Plain constexpr strings: the shim uses them on its fork
// path, without libstdc++ allocation (a leaf header). What each one means:
// formats/EVENT_LOG.md; the shape as JSON Schema: docs/event-schema.json (a test checks that
// the lists below and that file name the same events and keys).
#pragma once

#include <stddef.h>
#include <stdint.h>

// The records a file holds: X(Id, "name"). The first three are not events: the file's
// header (first line, the only one carrying `schema` and the process's identity), the
// module map and the stack table.
#define FORKGUARD_EVENT_TYPES(X)     \
  X(Header, "header")                \
  X(Module, "module")                \
  X(StackRecord, "stack")            \
  X(ProcessStart, "process_start")   \
  X(ProcessExit, "process_exit")     \
  X(RdmaInit, "rdma_init")           \
  X(RdmaCall, "rdma_call")           \
  X(MrRegister, "mr_register")       \
  X(MrDeregister, "mr_deregister")   \
  X(MrCounts, "mr_counts")           \
  X(ForkInit, "fork_init")           \
  X(Fork, "fork")                    \
  X(ForkChild, "fork_child")         \
  X(Spawn, "spawn")                  \
  X(ChildExec, "child_exec")         \
  X(UnwatchedExec, "unwatched_exec") \
  X(Exec, "exec")                    \
  X(ChildSegv, "child_segv")         \
  X(Note, "note")

// Every key of every record and of the objects inside them: X(Id, "name").
#define FORKGUARD_EVENT_KEYS(X)           \
  X(Schema, "schema")                     \
  X(Event, "event")                       \
  X(Ts, "ts")                             \
  X(TsNs, "ts_ns")                        \
  X(Seq, "seq")                           \
  X(Tid, "tid")                           \
  X(Host, "host")                         \
  X(Pid, "pid")                           \
  X(Ppid, "ppid")                         \
  X(Prog, "prog")                         \
  X(Rank, "rank")                         \
  X(LocalRank, "local_rank")              \
  X(Job, "job")                           \
  X(Step, "step")                         \
  X(StartNs, "start_ns")                  \
  X(Source, "source")                     \
  X(NsPid, "ns_pid")                      \
  X(NsHost, "ns_host")                    \
  X(Id, "id")                             \
  X(Path, "path")                         \
  X(Base, "base")                         \
  X(BuildId, "build_id")                  \
  X(Frames, "frames")                     \
  X(Ip, "ip")                             \
  X(Obj, "obj")                           \
  X(Off, "off")                           \
  X(Sym, "sym")                           \
  X(Symoff, "symoff")                     \
  X(Py, "py")                             \
  X(File, "file")                         \
  X(Line, "line")                         \
  X(Func, "func")                         \
  X(Argv, "argv")                         \
  X(Mode, "mode")                         \
  X(ShimVersion, "shim_version")          \
  X(Exe, "exe")                           \
  X(Call, "call")                         \
  X(Device, "device")                     \
  X(Handle, "handle")                     \
  X(Ok, "ok")                             \
  X(Errno, "errno")                       \
  X(Stack, "stack")                       \
  X(Mr, "mr")                             \
  X(Dontfork, "dontfork")                 \
  X(Access, "access")                     \
  X(Addr, "addr")                         \
  X(Len, "len")                           \
  X(Sites, "sites")                       \
  X(N, "n")                               \
  X(Bytes, "bytes")                       \
  X(Deregs, "deregs")                     \
  X(Result, "result")                     \
  X(Caller, "caller")                     \
  X(Verdict, "verdict")                   \
  X(Reasons, "reasons")                   \
  X(Action, "action")                     \
  X(Site, "site")                         \
  X(Reported, "reported")                 \
  X(Allowed, "allowed")                   \
  X(Suppressed, "suppressed")             \
  X(Init, "init")                         \
  X(AgeMs, "age_ms")                      \
  X(Ranges, "ranges")                     \
  X(Kind, "kind")                         \
  X(Effect, "effect")                     \
  X(Basis, "basis")                       \
  X(Probe, "probe")                       \
  X(Fixed, "fixed")                       \
  X(Live, "live")                         \
  X(Contexts, "contexts")                 \
  X(Pds, "pds")                           \
  X(Mrs, "mrs")                           \
  X(CmChannels, "cm_channels")            \
  X(CmIds, "cm_ids")                      \
  X(UverbsFds, "uverbs_fds")              \
  X(RdmaCmFds, "rdma_cm_fds")             \
  X(Threads, "threads")                   \
  X(MaxMapCount, "max_map_count")         \
  X(MapCount, "map_count")                \
  X(KernelCof, "kernel_cof")              \
  X(KernelCofSource, "kernel_cof_source") \
  X(PinProbe, "pin_probe")                \
  X(Partial, "partial")                   \
  X(Via, "via")                           \
  X(Fix, "fix")                           \
  X(ChildExecs, "child_execs")            \
  X(HeldBy, "held_by")                    \
  X(ForkSupport, "fork_support")          \
  X(On, "on")                             \
  X(By, "by")                             \
  X(RdmaCore, "rdma_core")                \
  X(ChildPid, "child_pid")                \
  X(Safe, "safe")                         \
  X(Why, "why")                           \
  X(HeldRdma, "held_rdma")                \
  X(ExecBy, "exec_by")                    \
  X(Range, "range")                       \
  X(RegStack, "reg_stack")                \
  X(Signal, "signal")                     \
  X(Status, "status")                     \
  X(Text, "text")                         \
  X(PinnedPages, "pinned_pages")          \
  X(RangesOmitted, "ranges_omitted")      \
  X(MappingsUnread, "mappings_unread")    \
  X(ShimSuppressed, "shim_suppressed")    \
  X(Enforce, "enforce")                   \
  X(Hook, "hook")                         \
  X(Lost, "lost")

// Which keys each /2 record has: X(Type, Key), in the order the shim writes them. Every
// line after the header also has `event`, `ts`, `seq` and `tid` (FORKGUARD_LINE_KEYS).
// /1 files (read, no longer written) carried the header's keys and `ts_ns` on every line,
// and mr_register had `addr`, `len`, `access` and `handle` where /2 has `mr`.
#define FORKGUARD_RECORD_KEYS(X) \
  X(Header, Schema)              \
  X(Header, Event)               \
  X(Header, Host)                \
  X(Header, Pid)                 \
  X(Header, Ppid)                \
  X(Header, Prog)                \
  X(Header, Rank)                \
  X(Header, LocalRank)           \
  X(Header, Job)                 \
  X(Header, Step)                \
  X(Header, StartNs)             \
  X(Header, Source)              \
  X(Header, NsPid)               \
  X(Header, NsHost)              \
  X(Module, Id)                  \
  X(Module, Path)                \
  X(Module, Base)                \
  X(Module, BuildId)             \
  X(StackRecord, Id)             \
  X(StackRecord, Frames)         \
  X(ProcessStart, Argv)          \
  X(ProcessStart, Mode)          \
  X(ProcessStart, ShimVersion)   \
  X(ProcessStart, Exe)           \
  X(ProcessStart, Enforce)       \
  X(ProcessStart, Hook)          \
  X(ProcessExit, Status)         \
  X(RdmaInit, Call)              \
  X(RdmaInit, Device)            \
  X(RdmaInit, Stack)             \
  X(RdmaCall, Call)              \
  X(RdmaCall, Device)            \
  X(RdmaCall, Handle)            \
  X(RdmaCall, Ok)                \
  X(RdmaCall, Errno)             \
  X(MrRegister, Mr)              \
  X(MrRegister, Stack)           \
  X(MrRegister, Call)            \
  X(MrRegister, Dontfork)        \
  X(MrDeregister, Handle)        \
  X(MrDeregister, Addr)          \
  X(MrDeregister, Len)           \
  X(MrCounts, Sites)             \
  X(MrCounts, Deregs)            \
  X(ForkInit, Result)            \
  X(ForkInit, Errno)             \
  X(ForkInit, Caller)            \
  X(Fork, Verdict)               \
  X(Fork, Reasons)               \
  X(Fork, Action)                \
  X(Fork, Errno)                 \
  X(Fork, Site)                  \
  X(Fork, Reported)              \
  X(Fork, Allowed)               \
  X(Fork, Suppressed)            \
  X(Fork, Stack)                 \
  X(Fork, Init)                  \
  X(Fork, Ranges)                \
  X(Fork, Live)                  \
  X(Fork, Threads)               \
  X(Fork, MaxMapCount)           \
  X(Fork, MapCount)              \
  X(Fork, KernelCof)             \
  X(Fork, KernelCofSource)       \
  X(Fork, PinProbe)              \
  X(Fork, Partial)               \
  X(Fork, Via)                   \
  X(Fork, Fix)                   \
  X(Fork, ChildExecs)            \
  X(Fork, HeldBy)                \
  X(Fork, ForkSupport)           \
  X(Fork, PinnedPages)           \
  X(Fork, RangesOmitted)         \
  X(Fork, MappingsUnread)        \
  X(Fork, ShimSuppressed)        \
  X(ForkChild, ChildPid)         \
  X(Spawn, Call)                 \
  X(Spawn, ChildPid)             \
  X(Spawn, Ok)                   \
  X(Spawn, Safe)                 \
  X(ChildExec, Path)             \
  X(UnwatchedExec, Path)         \
  X(UnwatchedExec, Why)          \
  X(UnwatchedExec, HeldRdma)     \
  X(UnwatchedExec, ExecBy)       \
  X(Exec, Path)                  \
  X(ChildSegv, Addr)             \
  X(ChildSegv, Range)            \
  X(ChildSegv, Call)             \
  X(ChildSegv, RegStack)         \
  X(ChildSegv, Signal)           \
  X(Note, Text)                  \
  X(Note, Lost)

// The keys of every line after a /2 file's header: X(Key).
#define FORKGUARD_LINE_KEYS(X) X(Event) X(Ts) X(Seq) X(Tid)

// The keys of the objects inside records: X(Member, Key), `Member` the key whose value is
// the object, or an array of them. A frame of a stack is `[module,off]` in a stack record;
// expanded (a child's SIGSEGV report, the reader's tests) it is an object: `frames`.
#define FORKGUARD_OBJECT_KEYS(X) \
  X(Init, Call)                  \
  X(Init, Device)                \
  X(Init, AgeMs)                 \
  X(Init, Stack)                 \
  X(Ranges, Addr)                \
  X(Ranges, Len)                 \
  X(Ranges, Call)                \
  X(Ranges, Dontfork)            \
  X(Ranges, Kind)                \
  X(Ranges, Effect)              \
  X(Ranges, Basis)               \
  X(Ranges, Probe)               \
  X(Ranges, Fixed)               \
  X(Live, Contexts)              \
  X(Live, Pds)                   \
  X(Live, Mrs)                   \
  X(Live, CmChannels)            \
  X(Live, CmIds)                 \
  X(Live, UverbsFds)             \
  X(Live, RdmaCmFds)             \
  X(ForkSupport, On)             \
  X(ForkSupport, By)             \
  X(ForkSupport, RdmaCore)       \
  X(Sites, Stack)                \
  X(Sites, Call)                 \
  X(Sites, Dontfork)             \
  X(Sites, N)                    \
  X(Sites, Bytes)                \
  X(Range, Addr)                 \
  X(Range, Len)                  \
  X(Frames, Ip)                  \
  X(Frames, Obj)                 \
  X(Frames, Off)                 \
  X(Frames, Sym)                 \
  X(Frames, Symoff)              \
  X(Frames, Py)                  \
  X(Py, File)                    \
  X(Py, Line)                    \
  X(Py, Func)

// The values of the event log's value sets: X(Id, "name"), one list per set, written by the
// shim and read by the CLI from the names below (kVerdictHazard = "hazard", ...;
// kVerdictNames[] in list order). docs/event-schema.json's enums name the same values (a
// test checks).
// A fork's `verdict`.
#define FORKGUARD_VERDICTS(X) \
  X(Clean, "clean")           \
  X(Hazard, "hazard")

// process_start's `mode`: FORKGUARD_MODE's values, in the order of the shim's Mode
// (shim/base/config.h). Logs of forkguard watch say kModeWatch.
#define FORKGUARD_MODES(X) \
  X(Warn, "warn")          \
  X(Error, "error")        \
  X(Abort, "abort")        \
  X(Off, "off")            \
  X(Fix, "fix")

// A fork's `reasons`, in the order of the verdict's reason bits (shim/verdict/verdict.h).
#define FORKGUARD_REASONS(X)               \
  X(ChildSegv, "child-segv")               \
  X(ParentCorruption, "parent-corruption") \
  X(InheritedRdma, "inherited-rdma")

// A fork's `action`: what the shim did with it (refused: what forkguard watch --enforce did).
#define FORKGUARD_ACTIONS(X) \
  X(Proceeded, "proceeded")  \
  X(Failed, "failed")        \
  X(Aborted, "aborted")      \
  X(Fixed, "fixed")          \
  X(Off, "off")              \
  X(Refused, "refused")

// A fork's `via`: the entry point that forked, in the order of the shim's ForkVia
// (shim/messages/fork_report.h). Logs of older shims may also say "backstop" (kViaBackstop), which
// this shim does not write.
#define FORKGUARD_FORK_ENTRIES(X) \
  X(Fork, "fork")                 \
  X(Atfork, "atfork")             \
  X(UnderscoreFork, "_Fork")      \
  X(Daemon, "daemon")             \
  X(Forkpty, "forkpty")

// A fork range's `fixed`: fix mode's change to it (absent: unchanged).
#define FORKGUARD_FIXED(X) \
  X(Copied, "copied")      \
  X(Withheld, "withheld")  \
  X(Failed, "failed")

namespace forkguard::schema {

// The schema the shim writes, and the one the reader still reads.
inline constexpr const char kEventV2[] = "forkguard.event/2";
inline constexpr const char kEventV1[] = "forkguard.event/1";
// The header's `source` in logs of forkguard watch (absent: the shim's), and the mode its
// process_start says.
inline constexpr const char kSourceWatcher[] = "watcher";
inline constexpr const char kModeWatch[] = "watch";

// A record's type: EventType::kFork, ...; kCount: how many there are.
enum class EventType : uint8_t {
#define FORKGUARD_X(id, name) k##id,
  FORKGUARD_EVENT_TYPES(FORKGUARD_X)
#undef FORKGUARD_X
      kCount,
};

// A key: Key::kVerdict, ...; kCount: how many there are.
enum class Key : uint8_t {
#define FORKGUARD_X(id, name) k##id,
  FORKGUARD_EVENT_KEYS(FORKGUARD_X)
#undef FORKGUARD_X
      kCount,
};

// The names: kFork = "fork", kKeyVerdict = "verdict", ...
#define FORKGUARD_X(id, name) inline constexpr const char k##id[] = name;
FORKGUARD_EVENT_TYPES(FORKGUARD_X)
#undef FORKGUARD_X
#define FORKGUARD_X(id, name) inline constexpr const char kKey##id[] = name;
FORKGUARD_EVENT_KEYS(FORKGUARD_X)
#undef FORKGUARD_X

// The names by enum: kEventTypeNames[EventType::kFork] = "fork", kKeyNames[Key::kVia] = "via".
inline constexpr const char* kEventTypeNames[] = {
#define FORKGUARD_X(id, name) k##id,
    FORKGUARD_EVENT_TYPES(FORKGUARD_X)
#undef FORKGUARD_X
};
inline constexpr const char* kKeyNames[] = {
#define FORKGUARD_X(id, name) kKey##id,
    FORKGUARD_EVENT_KEYS(FORKGUARD_X)
#undef FORKGUARD_X
};
static_assert(sizeof(kEventTypeNames) / sizeof(kEventTypeNames[0]) ==
              static_cast<unsigned>(EventType::kCount));
static_assert(sizeof(kKeyNames) / sizeof(kKeyNames[0]) == static_cast<unsigned>(Key::kCount));

constexpr const char* EventTypeName(EventType t) {
  return kEventTypeNames[static_cast<unsigned>(t)];
}
constexpr const char* KeyName(Key k) { return kKeyNames[static_cast<unsigned>(k)]; }

// The values: kVerdictHazard = "hazard", kReasonChildSegv = "child-segv", kActionFailed =
// "failed", kViaAtfork = "atfork", kFixedCopied = "copied", ...; and each set in list order:
// kVerdictNames[], kReasonNames[], kActionNames[], kViaNames[], kFixedNames[].
#define FORKGUARD_X(id, name) inline constexpr const char kVerdict##id[] = name;
FORKGUARD_VERDICTS(FORKGUARD_X)
#undef FORKGUARD_X
#define FORKGUARD_X(id, name) inline constexpr const char kReason##id[] = name;
FORKGUARD_REASONS(FORKGUARD_X)
#undef FORKGUARD_X
#define FORKGUARD_X(id, name) inline constexpr const char kMode##id[] = name;
FORKGUARD_MODES(FORKGUARD_X)
#undef FORKGUARD_X
#define FORKGUARD_X(id, name) inline constexpr const char kAction##id[] = name;
FORKGUARD_ACTIONS(FORKGUARD_X)
#undef FORKGUARD_X
#define FORKGUARD_X(id, name) inline constexpr const char kVia##id[] = name;
FORKGUARD_FORK_ENTRIES(FORKGUARD_X)
#undef FORKGUARD_X
inline constexpr const char kViaBackstop[] = "backstop";  // read, not written
inline constexpr const char kViaKernel[] = "kernel";      // written by forkguard watch
#define FORKGUARD_X(id, name) inline constexpr const char kFixed##id[] = name;
FORKGUARD_FIXED(FORKGUARD_X)
#undef FORKGUARD_X
#define FORKGUARD_X(id, name) name,
inline constexpr const char* kVerdictNames[] = {FORKGUARD_VERDICTS(FORKGUARD_X)};
inline constexpr const char* kReasonNames[] = {FORKGUARD_REASONS(FORKGUARD_X)};
inline constexpr const char* kActionNames[] = {FORKGUARD_ACTIONS(FORKGUARD_X)};
inline constexpr const char* kModeNames[] = {FORKGUARD_MODES(FORKGUARD_X)};
inline constexpr const char* kViaNames[] = {FORKGUARD_FORK_ENTRIES(FORKGUARD_X)};
inline constexpr const char* kFixedNames[] = {FORKGUARD_FIXED(FORKGUARD_X)};
#undef FORKGUARD_X

// Whether `s` is one of FORKGUARD_MODE's values as written (lower case).
constexpr bool IsModeName(const char* s) {
  for (const char* m : kModeNames) {
    size_t i = 0;
    while (m[i] != '\0' && m[i] == s[i]) ++i;
    if (m[i] == '\0' && s[i] == '\0') return true;
  }
  return false;
}

// Values the log writes that are names too.
// mr_register's `call` when absent: the registration was ibv_reg_mr.
inline constexpr const char kDefaultRegCall[] = "ibv_reg_mr";

}  // namespace forkguard::schema
