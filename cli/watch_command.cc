// forkguard watch: the node-wide watcher. Loads the BPF object of bpf/watch.bpf.c, which
// judges every fork that makes a process in the parent before the child exists, from the
// kernel's own view of the process's registered ranges; writes each judged process's
// forkguard.event/2 log (cli/watch_log.h) and, with --enforce, has the kernel refuse the
// forks the rule says harm memory (or every fork that inherits RDMA state).
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>

#include "api/census.h"
#include "bpf/watch.skel.h"
#include "bpf/watch_events.h"
#include "cli/commands.h"
#include "cli/doctor_watch.h"
#include "cli/watch_log.h"
#include "cli/watch_state.h"
#include "facts/fork_rule.h"
#include "facts/machine_facts.h"
#include "facts/pin_probe.h"
#include "flags/flags.h"

namespace forkguard::cli {
namespace {

const char kWatchHelpHead[] = R"(NAME
    forkguard watch - judge every fork on this machine in the kernel, no preload needed

SYNOPSIS
    forkguard watch --log DIR [--enforce off|memory|all] [--persist]
                    [--ready-file FILE]
    forkguard watch --unpin

DESCRIPTION
    Loads a BPF program (root) that sees every process's registered memory
    (ib_umem_get and ib_umem_release: MRs and the queue buffers drivers pin the
    same way), its uverbs and rdma_cm files and every fork, including those of
    static binaries, set-user-ID programs, processes whose environment dropped
    LD_PRELOAD, containers and processes started before forkguard. A fork that
    makes a process (not a thread, vfork or posix_spawn: nothing that shares the
    parent's memory) is judged in the parent before the child exists, by the
    rule the shim uses (the memory kind and MADV_DONTFORK of each registered
    range, from the kernel's mapping, and this machine's facts: the pin probe
    and the kernel's copy-on-fork report).

    Each judged process gets a forkguard.event/2 log in DIR,
    forkguard-watch.HOST.PID.START_NS.jsonl, with "source":"watcher" in its
    header; `forkguard report` reads them beside the shim's logs. What the
    kernel cannot tell is said so in the log: no call stacks, no Python frames,
    no verbs objects but the registered ranges and device files; THP is not
    told from anonymous memory; memory registered before the watcher started
    is known by its pinned page count and the RDMA netlink census only.

    Records it could not keep (the ring buffer full, a registration probe or
    program run the kernel skipped) are counted, logged and printed, never
    dropped silently. The watcher stops on SIGINT or SIGTERM with its
    logs complete; the BPF programs go with it, unless --persist pinned them:
    then the kernel goes on judging and refusing forks with no logs until
    `forkguard watch --unpin` removes them (or the machine reboots).

OPTIONS
)";

const char kWatchHelpTail[] = R"(
EXIT STATUS
    0    stopped by SIGINT or SIGTERM; --unpin: nothing is pinned now
    1    the BPF object could not be loaded, attached or pinned, or an earlier
         --persist's programs are still pinned (the reason on stderr)
    2    bad command line; not root
)";

volatile sig_atomic_t g_stop = 0;
void OnStop(int) { g_stop = 1; }

int LibbpfPrint(enum libbpf_print_level level, const char* format, va_list args) {
  if (level == LIBBPF_DEBUG) return 0;
  return vfprintf(stderr, format, args);
}

static_assert(offsetof(fgw_small, advice) == offsetof(fgw_event, advice) &&
                  offsetof(fgw_small, comm) == offsetof(fgw_event, comm) &&
                  sizeof(fgw_small) <= offsetof(fgw_event, vma_busy),
              "a small record is the start of fgw_event");

// One record into the logs. One record must never stop the watcher (a process gone mid-read,
// a full disk): said, and the next record is read.
void LogRecord(WatchLogs* logs, const fgw_event& e) {
  try {
    logs->Record(e);
  } catch (const std::exception& ex) {
    fprintf(stderr, "forkguard watch: a record of pid %u not logged: %s\n", e.tgid, ex.what());
  }
}

int OnRecord(void* ctx, void* data, size_t size) {
  WatchLogs* logs = static_cast<WatchLogs*>(ctx);
  if (size == sizeof(fgw_small)) {
    // A small record (bpf/watch_events.h): read into a zeroed fgw_event.
    fgw_event e{};
    memcpy(&e, data, sizeof(fgw_small));
    LogRecord(logs, e);
  } else if (size >= sizeof(fgw_event)) {
    LogRecord(logs, *static_cast<const fgw_event*>(data));
  }
  return 0;
}

// Removes what is pinned in kWatchPinDir, kWatchPinDir itself and the record of what was pinned:
// how many links were unpinned, or -1 (errno set) when one could not be.
int Unpin() {
  DIR* d = opendir(kWatchPinDir);
  if (d == nullptr) {
    if (errno != ENOENT) return -1;
    RemovePinnedWatch(kWatchStateDir);
    return 0;
  }
  int n = 0, failed = 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    if (unlinkat(dirfd(d), e->d_name, 0) == 0) {
      ++n;
    } else {
      failed = errno;
    }
  }
  closedir(d);
  if (failed == 0 && rmdir(kWatchPinDir) != 0) failed = errno;
  if (failed != 0) {
    errno = failed;
    return -1;
  }
  // Only once nothing is pinned: while a link stays, ps goes on saying so to every user.
  RemovePinnedWatch(kWatchStateDir);
  return n;
}

// Pins every attached link of the object in kWatchPinDir, so that the programs outlive this
// process: "" or why not (nothing stays pinned then). Links that are perf events (kprobes
// before Linux 5.15) cannot be pinned.
std::string PinLinks(watch_bpf* skel) {
  if (mkdir(kWatchPinDir, 0700) != 0 && errno != EEXIST)
    return std::string("cannot create ") + kWatchPinDir + ": " + strerror(errno) +
           " (is bpffs mounted on /sys/fs/bpf?)";
  const bpf_object_skeleton* s = skel->skeleton;
  for (int i = 0; i < s->prog_cnt; ++i) {
    bpf_link* link = *s->progs[i].link;
    if (link == nullptr) continue;
    std::string path = std::string(kWatchPinDir) + "/" + s->progs[i].name;
    if (bpf_link__pin(link, path.c_str()) != 0) {
      std::string why = std::string("cannot pin ") + s->progs[i].name + " in " + kWatchPinDir +
                        ": " + strerror(errno) +
                        (errno == EINVAL ? " (this kernel attaches kprobes as perf events, which "
                                           "cannot be pinned; Linux 5.15 and later can)"
                                         : "");
      Unpin();
      return why;
    }
  }
  return "";
}

// After PinLinks: closing the links no longer detaches them.
void DisconnectLinks(watch_bpf* skel) {
  const bpf_object_skeleton* s = skel->skeleton;
  for (int i = 0; i < s->prog_cnt; ++i)
    if (bpf_link* link = *s->progs[i].link) bpf_link__disconnect(link);
}

// The records lost so far: those the programs counted, and the runs the kernel skipped of the
// programs it counts them for (trampolines: LSM, fmod_ret, fexit, tp_btf; a kprobe's skipped
// runs are counted by the programs themselves, from the entry and return probes' table).
uint64_t Lost(const watch_bpf* skel) {
  uint32_t zero = 0;
  uint64_t n = 0;
  bpf_map__lookup_elem(skel->maps.lost, &zero, sizeof(zero), &n, sizeof(n), 0);
  const bpf_object_skeleton* s = skel->skeleton;
  for (int i = 0; i < s->prog_cnt; ++i) {
    const bpf_program* prog = *s->progs[i].prog;
    bpf_prog_type type = bpf_program__type(prog);
    if (type != BPF_PROG_TYPE_TRACING && type != BPF_PROG_TYPE_LSM) continue;
    int fd = bpf_program__fd(prog);
    if (fd < 0) continue;  // not loaded on this kernel
    bpf_prog_info info{};
    uint32_t len = sizeof(info);
    if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0) n += info.recursion_misses;
  }
  return n;
}

// Registrations whose return probe never ran, still in the entry probe's table at the end
// (the threads still alive; those that exited were counted then).
uint64_t UnfinishedRegistrations(const watch_bpf* skel) {
  uint64_t n = 0, key = 0, next = 0;
  const uint64_t* prev = nullptr;
  while (bpf_map__get_next_key(skel->maps.umem_args, prev, &next, sizeof(next)) == 0) {
    ++n;
    key = next;
    prev = &key;
  }
  return n;
}

// The census's processes (forkguard ps) into the kernel's table: what they hold from before
// the watcher started.
void SeedFromCensus(watch_bpf* skel, WatchLogs* logs) {
  api::Census census = api::TakeCensus();
  for (const api::ProcessFacts& p : census.processes) {
    fgw_proc seed{};
    seed.devices = static_cast<uint32_t>(p.uverbs_fds.value_or(0) + p.rdma_cm_fds.value_or(0));
    for (const auto& r : p.mr_ranges) {
      if (seed.n >= FGW_MAX_MRS) break;
      seed.mr[seed.n].addr = r.start;
      seed.mr[seed.n].len = r.end - r.start;
      ++seed.n;
    }
    seed.overflow = static_cast<uint32_t>(
        p.objects.mrs > static_cast<long>(seed.n) ? p.objects.mrs - static_cast<long>(seed.n) : 0);
    uint32_t tgid = static_cast<uint32_t>(p.pid);
    bpf_map__update_elem(skel->maps.procs, &tgid, sizeof(tgid), &seed, sizeof(seed), BPF_NOEXIST);
    logs->Preexisting(p);
  }
}

}  // namespace

const flags::FlagTable& WatchFlags() {
  static const flags::FlagTable kTable = {
      {"log", "DIR", "", "write the judged processes' event logs in DIR (made 0700 if missing)"},
      {"enforce", "MODE", "off",
       "off: judge and log only; memory: refuse in the kernel a fork\n"
       "whose verdict is child-segv or parent-corruption; all: also\n"
       "one that only inherits RDMA state. Refused: fork() returns -1\n"
       "with EPERM in the program. Not refused: a fork the shim in\n"
       "the process lets through (FORKGUARD_ALLOW, suppressions)"},
      {"persist", "", "",
       "leave the programs in the kernel when the watcher stops\n"
       "(pinned in /sys/fs/bpf/forkguard-watch): forks go on being\n"
       "judged and refused, with no logs, until --unpin; needs\n"
       "--enforce memory or all, and Linux 5.15 or later"},
      {"unpin", "", "", "remove the programs an earlier --persist left, and exit"},
      {"ready-file", "FILE", "", "create FILE once the watcher is watching"},
      flags::HelpFlag("This text."),
  };
  return kTable;
}

std::string WatchHelp() {
  return kWatchHelpHead + flags::ColumnHelp(WatchFlags(), 4, 17) + kWatchHelpTail;
}

namespace {

// forkguard watch --unpin.
int UnpinMain() {
  if (geteuid() != 0) throw flags::UsageError("forkguard watch --unpin: run it as root");
  int n = Unpin();
  if (n < 0) {
    fprintf(stderr, "forkguard watch: cannot unpin %s: %s\n", kWatchPinDir, strerror(errno));
    return kExitFail;
  }
  fprintf(stderr, "forkguard watch: %d pinned programs removed%s\n", n,
          n > 0 ? ": the kernel no longer judges forks" : "");
  return kExitOk;
}

struct WatchOptions {
  std::string dir;
  std::string enforce_name;
  uint32_t enforce = FGW_ENFORCE_OFF;
  bool persist = false;
  std::string ready;
};

// The command line of a watcher; a UsageError when it is not one.
WatchOptions ParseWatchOptions(const flags::Options& a) {
  WatchOptions o;
  o.dir = a.Str("log");
  if (o.dir.empty()) throw flags::UsageError("--log DIR is required");
  o.persist = a.Has("persist");
  o.ready = a.Str("ready-file");
  o.enforce_name = a.Str("enforce");
  if (o.enforce_name == "off") {
    o.enforce = FGW_ENFORCE_OFF;
  } else if (o.enforce_name == "memory") {
    o.enforce = FGW_ENFORCE_MEMORY;
  } else if (o.enforce_name == "all") {
    o.enforce = FGW_ENFORCE_ALL;
  } else {
    throw flags::UsageError("--enforce takes off, memory or all, not " + o.enforce_name);
  }
  if (o.persist && o.enforce == FGW_ENFORCE_OFF)
    throw flags::UsageError("--persist keeps enforcement: it needs --enforce memory or all");
  return o;
}

// The machine's facts, as the shim's rule reads them.
facts::MachineFacts ThisMachine() {
  facts::MachineFacts m;
  m.reported_cof = facts::ReportedCopyOnFork(nullptr);
  m.probe = facts::PinProbeForThisBoot(nullptr);
  m.rdma_core = facts::RdmaCoreInstalled(nullptr, 0);
  return m;
}

// The BPF object opened, set up for this machine and `o`, loaded, attached (and pinned with
// --persist); the hook that judges in *hook, what it runs on in *how. nullptr (said on
// stderr) when any step failed.
watch_bpf* LoadPrograms(const WatchOptions& o, const facts::MachineFacts& m, const char** hook,
                        std::string* how) {
  libbpf_set_print(LibbpfPrint);
  watch_bpf* skel = watch_bpf__open();
  if (skel == nullptr) {
    fprintf(stderr, "forkguard watch: cannot open the BPF object: %s\n", strerror(errno));
    return nullptr;
  }
  skel->rodata->enforce = o.enforce;
  skel->rodata->watcher_tgid = static_cast<uint32_t>(getpid());
  for (int kind = 0; kind < facts::kMemoryKinds; ++kind) {
    for (int dc = 0; dc < 2; ++dc) {
      facts::RangeFacts r;
      r.kind = static_cast<facts::MemoryKind>(kind);
      r.dontfork = dc ? facts::Tri::kYes : facts::Tri::kNo;
      skel->rodata->effect_table[kind * 2 + dc] =
          static_cast<uint8_t>(facts::DecideRange(m, r).effect);
    }
  }
  doctor::WatcherFacts wf = doctor::GatherWatcherFacts(false);
  *hook = doctor::ChooseJudgeProgram(skel, wf);
  // The judging hook, and how the programs see what they judge by.
  *how = std::string(*hook) + (wf.find_vma ? "" : ", mappings kept since registration") +
         (wf.umem_btf ? ", ib_umem_get by fexit" : ", ib_umem_get by kretprobe");
  int err = watch_bpf__load(skel);
  if (err == 0) err = watch_bpf__attach(skel);
  if (err != 0) {
    fprintf(stderr,
            "forkguard watch: cannot load or attach the BPF programs (%s): the kernel needs BTF "
            "and the ib_core and ib_uverbs modules loaded (forkguard doctor: watcher)\n",
            strerror(-err));
    watch_bpf__destroy(skel);
    return nullptr;
  }
  if (o.persist) {
    std::string why = PinLinks(skel);
    if (!why.empty()) {
      fprintf(stderr, "forkguard watch: --persist: %s\n", why.c_str());
      watch_bpf__destroy(skel);
      return nullptr;
    }
    // For `forkguard ps`, whenever no watcher runs (this one stopped or died).
    if (!WritePinnedWatch(o.enforce_name, *hook, kWatchStateDir, &why))
      fprintf(stderr, "forkguard watch: %s (forkguard ps will not show the pinned programs)\n",
              why.c_str());
  }
  return skel;
}

// SIGINT and SIGTERM stop the watch loop; then `ready` (when not "") is created, holding
// this process's pid.
void AnnounceReady(const std::string& ready) {
  struct sigaction sa {};
  sa.sa_handler = OnStop;  // no SA_RESTART: the poll returns
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  if (ready.empty()) return;
  FILE* f = fopen(ready.c_str(), "w");
  if (f == nullptr) {
    fprintf(stderr, "forkguard watch: cannot create %s: %s\n", ready.c_str(), strerror(errno));
    return;
  }
  fprintf(f, "%d\n", static_cast<int>(getpid()));
  fclose(f);
}

// Reads the ring buffer into the logs until SIGINT or SIGTERM, keeping forkguard ps's state
// file (written now, then when it changes, at most twice a second) and the lost records'
// count in the logs: the count logged so far.
uint64_t WatchLoop(watch_bpf* skel, ring_buffer* rb, WatchLogs* logs) {
  std::string state_error;
  if (!WriteWatchState(logs->state(), kWatchStateDir, &state_error))
    fprintf(stderr, "forkguard watch: %s (forkguard ps will not show the watcher)\n",
            state_error.c_str());
  timespec last_state{};
  clock_gettime(CLOCK_MONOTONIC, &last_state);
  uint64_t lost_logged = 0;
  while (!g_stop) {
    int n = ring_buffer__poll(rb, 250);
    // Registrations and madvise calls do not wake the poll: read what waits either way.
    if (n >= 0) n = ring_buffer__consume(rb);
    if (n < 0 && n != -EINTR) {
      fprintf(stderr, "forkguard watch: ring buffer: %s\n", strerror(-n));
      break;
    }
    uint64_t lost = Lost(skel);
    if (lost != lost_logged) {
      logs->Lost(lost - lost_logged);
      lost_logged = lost;
    }
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    if ((now.tv_sec - last_state.tv_sec) * 1000 + (now.tv_nsec - last_state.tv_nsec) / 1000000 >=
            500 &&
        logs->TakeChanged()) {
      WriteWatchState(logs->state(), kWatchStateDir, &state_error);
      last_state = now;
    }
  }
  return lost_logged;
}

// The watcher's end: the programs detached (or, with --persist, left pinned), the ring
// buffer read to its end, the logs closed, and what was judged said.
void StopWatching(const WatchOptions& o, watch_bpf* skel, ring_buffer* rb, WatchLogs* logs,
                  uint64_t lost_logged) {
  RemoveWatchState(kWatchStateDir);
  if (o.persist) {
    // The pinned links stay: what arrives after this last read is not logged.
    DisconnectLinks(skel);
  } else {
    // Detach first, then read what is left: nothing arrives after the last read.
    watch_bpf__detach(skel);
  }
  ring_buffer__consume(rb);
  uint64_t lost = Lost(skel);
  // Detached, nothing finishes these any more (pinned, the programs still may).
  if (!o.persist) lost += UnfinishedRegistrations(skel);
  if (lost != lost_logged) logs->Lost(lost - lost_logged);
  ring_buffer__free(rb);
  watch_bpf__destroy(skel);
  logs->Close();
  fprintf(stderr,
          "forkguard watch: stopped: %lld forks judged (%lld refused) in %lld processes; "
          "%llu records lost\n",
          static_cast<long long>(logs->forks()), static_cast<long long>(logs->refused()),
          static_cast<long long>(logs->processes()), static_cast<unsigned long long>(lost));
  if (o.persist)
    fprintf(stderr,
            "forkguard watch: enforcement %s stays, pinned in %s, with no logs: "
            "`forkguard watch --unpin` removes it\n",
            o.enforce_name.c_str(), kWatchPinDir);
}

}  // namespace

int WatchMain(int argc, char** argv) {
  flags::Options a = flags::Options::Parse(argc, argv, WatchFlags());
  if (flags::PrintHelpIfAsked(a, WatchHelp)) return kExitOk;
  if (a.Has("unpin")) return UnpinMain();
  const WatchOptions o = ParseWatchOptions(a);
  if (geteuid() != 0) throw flags::UsageError("forkguard watch loads BPF programs: run it as root");
  if (CountPinnedLinks(kWatchPinDir) != 0) {
    fprintf(stderr,
            "forkguard watch: the programs of an earlier `forkguard watch --persist` are still "
            "pinned in %s and judge forks: `forkguard watch --unpin` first\n",
            kWatchPinDir);
    return kExitFail;
  }

  const facts::MachineFacts m = ThisMachine();
  const char* hook = "";
  std::string how;
  watch_bpf* skel = LoadPrograms(o, m, &hook, &how);
  if (skel == nullptr) return kExitFail;
  // The hook first: the watcher's own log names it in its process_start.
  WatchLogs logs(o.dir, m, o.enforce_name);
  logs.SetHook(how);
  std::string error;
  ring_buffer* rb = nullptr;
  if (!logs.Open(&error)) {
    fprintf(stderr, "forkguard watch: %s\n", error.c_str());
  } else {
    SeedFromCensus(skel, &logs);
    rb = ring_buffer__new(bpf_map__fd(skel->maps.events), OnRecord, &logs, nullptr);
    if (rb == nullptr)
      fprintf(stderr, "forkguard watch: cannot read the ring buffer: %s\n", strerror(errno));
  }
  if (rb == nullptr) {
    if (o.persist) Unpin();
    watch_bpf__destroy(skel);
    return kExitFail;
  }
  AnnounceReady(o.ready);
  fprintf(stderr, "forkguard watch: watching (hook %s, enforce %s), logs in %s\n", how.c_str(),
          o.enforce_name.c_str(), o.dir.c_str());
  logs.state().pid = getpid();
  logs.state().enforce = o.enforce_name;
  logs.state().hook = hook;
  logs.state().log = o.dir;
  uint64_t lost_logged = WatchLoop(skel, rb, &logs);
  StopWatching(o, skel, rb, &logs, lost_logged);
  return kExitOk;
}

}  // namespace forkguard::cli
