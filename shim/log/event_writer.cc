#include "shim/log/event_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>

#include "formats/event_schema.h"
#include "formats/fix_text.h"
#include "shim/verdict/verdict.h"

namespace forkguard {
namespace {

void AppendNullableStr(TextBuffer& b, const char* s) {
  if (s != nullptr && s[0] != '\0') {
    b.JsonStr(s);
  } else {
    b.Str("null");
  }
}

void AppendNullableInt(TextBuffer& b, long v) {
  if (v >= 0) {
    b.Dec(v);
  } else {
    b.Str("null");
  }
}

const char* Bool(bool v) { return v ? "true" : "false"; }

void AppendLive(TextBuffer& b, const LiveCounts& c) {
  b.Key(schema::kKeyLive)
      .FirstKey(schema::kKeyContexts)
      .Dec(c.contexts)
      .Key(schema::kKeyPds)
      .Dec(c.pds);
  b.Key(schema::kKeyMrs).Dec(c.mrs).Key(schema::kKeyCmChannels).Dec(c.cm_channels);
  b.Key(schema::kKeyCmIds).Dec(c.cm_ids).Key(schema::kKeyUverbsFds).Dec(c.uverbs_fds);
  b.Key(schema::kKeyRdmaCmFds).Dec(c.rdma_cm_fds).Char('}');
}

void AppendInit(TextBuffer& b, const InitRecord& init, int64_t now, EventLog& log, bool locked) {
  b.Key(schema::kKeyInit);
  if (!init.set) {
    b.Str("null");
    return;
  }
  b.FirstKey(schema::kKeyCall).Quoted(RdmaCallName(init.call)).Key(schema::kKeyDevice);
  AppendNullableStr(b, init.device);
  b.Key(schema::kKeyAgeMs).Dec((now - init.mono_ns) / 1000000);
  AppendStackRef(b, log, schema::kKeyStack, init.stack, &init.py, locked);
  b.Char('}');
}

void AppendRanges(TextBuffer& b, const ForkReport& r) {
  b.Key(schema::kKeyRanges).Char('[');
  bool first = true;
  const StateSnapshot* s = r.snap;
  for (int i = 0; s != nullptr && i < s->mr_count; ++i) {
    const MrRecord& m = s->mrs[i];
    if (!first) b.Char(',');
    first = false;
    b.FirstKey(schema::kKeyAddr).UDec(m.addr).Key(schema::kKeyLen).UDec(m.len);
    b.Key(schema::kKeyCall).Quoted(RdmaCallName(m.call)).Key(schema::kKeyDontfork);
    b.Str(Bool(r.mr_dontfork != nullptr && r.mr_dontfork[i]));
    if (r.mr_fate != nullptr) {
      // The rule's answer for this range (facts/fork_rule.h): its memory kind, what the fork
      // does to it, and what that was decided from.
      const MrFate& f = r.mr_fate[i];
      b.Key(schema::kKeyKind).Quoted(facts::MemoryKindName(f.kind));
      b.Key(schema::kKeyEffect).Quoted(facts::ForkEffectName(f.verdict.effect));
      b.Key(schema::kKeyBasis).Quoted(facts::BasisName(f.verdict.basis));
      if (f.verdict.basis == facts::Basis::kUnknownKernel) {
        b.Key(schema::kKeyProbe).Quoted(facts::ProbeWhyName(f.verdict.why));
      }
    }
    // What fix mode did to this range for the fork (shim/fix/fork_fix.h).
    if (r.mr_fix != nullptr && r.mr_fix[i] != FixAction::kNone) {
      b.Key(schema::kKeyFixed).Quoted(FixActionName(r.mr_fix[i]));
    }
    b.Char('}');
  }
  // dc mappings with no watched registration (the backstop: static libibverbs).
  for (int i = 0; s != nullptr && i < r.verdict.unattributed_dc && i < r.dc_count; ++i) {
    const Vma& v = r.dc_vmas[i];
    if (!first) b.Char(',');
    first = false;
    b.FirstKey(schema::kKeyAddr).UDec(v.start).Key(schema::kKeyLen).UDec(v.end - v.start);
    b.Key(schema::kKeyCall).Str("null").Key(schema::kKeyDontfork).Str("true}");
  }
  b.Char(']');
}

void AppendForkSupport(TextBuffer& b, const ForkSupportFact& f) {
  b.Key(schema::kKeyForkSupport).FirstKey(schema::kKeyOn).Str(Bool(f.on)).Key(schema::kKeyBy);
  if (f.env != nullptr) {
    b.JsonStr(f.env);
  } else {
    AppendNullableStr(b, f.caller);
  }
  b.Key(schema::kKeyRdmaCore);
  AppendNullableInt(b, f.rdma_core);
  b.Char('}');
}

// The fork event (formats/EVENT_LOG.md, `fork`). `locked`: the line owns the log's lock.
void AppendFork(TextBuffer& b, EventLog& log, bool locked, const ForkReport& r) {
  const ForkVerdict& v = r.verdict;
  // A hazard decided with the tables: everything the message says.
  const bool full = v.hazard() && !r.partial && r.snap != nullptr;
  b.Key(schema::kKeyVerdict)
      .Quoted(v.hazard() ? schema::kVerdictHazard : schema::kVerdictClean)
      .Key(schema::kKeyReasons)
      .Char('[');
  bool first = true;
  for (Reason reason : {kChildSegv, kParentCorruption, kInheritedRdma}) {
    if ((v.reasons & reason) == 0) continue;
    if (!first) b.Char(',');
    b.Quoted(ReasonName(reason));
    first = false;
  }
  const char* action = ForkActionName(r);
  b.Char(']').Key(schema::kKeyAction).Quoted(action);
  if (strcmp(action, schema::kActionFailed) == 0) b.Key(schema::kKeyErrno).Dec(FailErrno(r.via));
  b.Key(schema::kKeySite);
  if (r.partial) {
    b.Str("null");
  } else {
    AppendJsonHex(b, r.site);
  }
  b.Key(schema::kKeyReported).Str(Bool(r.reported));
  if (v.hazard()) b.Key(schema::kKeyAllowed).Str(Bool(r.allowed));
  if (r.suppressed != nullptr) b.Key(schema::kKeySuppressed).JsonStr(r.suppressed);
  if (r.partial || r.fork_stack == nullptr) {
    // No stack: the loader's locks and the stack table may be mid-use on this thread.
    b.Key(schema::kKeyStack).Str("[]");
  } else {
    AppendStackRef(b, log, schema::kKeyStack, *r.fork_stack, r.fork_py, locked);
  }
  if (full) {
    AppendInit(b, r.snap->init, r.now_mono_ns, log, locked);
  } else {
    b.Key(schema::kKeyInit).Str("null");
  }
  AppendRanges(b, r);  // a clean or partial fork has no snap: []
  AppendLive(b, r.snap != nullptr ? r.snap->counts : r.partial_live);
  b.Key(schema::kKeyThreads);
  AppendNullableInt(b, r.threads);
  b.Key(schema::kKeyMaxMapCount);
  AppendNullableInt(b, r.max_map_count);
  b.Key(schema::kKeyMapCount);
  AppendNullableInt(b, r.map_count);
  b.Key(schema::kKeyKernelCof);
  if (full) {
    const KernelCofFact& cof = r.cof;
    b.Str(cof.value == KernelCof::kYes ? "true" : cof.value == KernelCof::kNo ? "false" : "null");
    b.Key(schema::kKeyKernelCofSource).Quoted(cof.source);
    // This boot's pin probe (facts/pin_probe.h): "intact", "stale", or why it is unknown.
    b.Key(schema::kKeyPinProbe);
    bool first_kind = true;
    for (facts::MemoryKind k :
         {facts::MemoryKind::kAnonymous, facts::MemoryKind::kThp, facts::MemoryKind::kHugetlb}) {
      int i = static_cast<int>(k);
      if (first_kind) {
        b.FirstKey(facts::MemoryKindName(k));
      } else {
        b.Key(facts::MemoryKindName(k));
      }
      first_kind = false;
      b.Char('"');
      if (r.machine.probe.fate[i] != facts::PinFate::kUnknown) {
        b.Str(facts::PinFateName(r.machine.probe.fate[i]));
      } else {
        b.Str(facts::ProbeWhyName(r.machine.probe.why[i]));
      }
      b.Char('"');
    }
    b.Char('}');
  } else {
    b.Str("null");
  }
  if (r.partial) b.Key(schema::kKeyPartial).Str("true");
  b.Key(schema::kKeyVia).Quoted(ForkViaName(r.via));
  // The fix rule chosen, the exec'ing child, librdmacm's own leftovers, and who
  // turned fork support on.
  if (full) {
    FixRule rule = r.fix_rule >= 0 ? static_cast<FixRule>(r.fix_rule) : FixRule::kCProgram;
    b.Key(schema::kKeyFix).Quoted(FixRuleName(rule));
  }
  if (v.child_execs) b.Key(schema::kKeyChildExecs).Str("true");
  if (full && v.library_cache_only) b.Key(schema::kKeyHeldBy).Str("\"librdmacm\"");
  if (full) AppendForkSupport(b, r.fork_support);
}

}  // namespace

void LogNote(const char* text) {
  // 2 KiB: a config warning can name a 1 KiB path
  WriteEvent<2048>(schema::kNote, [&](TextBuffer& b) { b.Key(schema::kKeyText).JsonStr(text); });
}

void LogProcessStart(const char* mode, const char* shim_version) {
  EventLog& log = GlobalEventLog();
  EventLog::LargeLine line(log);
  if (!line.ok()) return;
  TextBuffer& b = line.text();
  log.Begin(b, schema::kProcessStart);
  b.Key(schema::kKeyArgv).Char('[');
  int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    char args[8192];
    ssize_t n = read(fd, args, sizeof(args) - 1);
    close(fd);
    if (n > 0) {
      args[n] = '\0';
      bool first = true;
      for (ssize_t i = 0; i < n;) {
        if (!first) b.Char(',');
        b.JsonStr(args + i);
        first = false;
        i += static_cast<ssize_t>(strlen(args + i)) + 1;
      }
    }
  }
  b.Char(']').Key(schema::kKeyMode).Quoted(mode);
  b.Key(schema::kKeyShimVersion).Quoted(shim_version).Key(schema::kKeyExe);
  char exe[1024];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n > 0) {
    exe[n] = '\0';
    b.JsonStr(exe);
  } else {
    b.Str("null");
  }
  log.End(b);
}

void LogRdmaCall(const char* call, const char* device, const void* handle, bool ok, int err) {
  WriteEvent<1024>(schema::kRdmaCall, [&](TextBuffer& b) {
    b.Key(schema::kKeyCall).Quoted(call).Key(schema::kKeyDevice);
    if (device != nullptr) {
      b.JsonStr(device);
    } else {
      b.Str("null");
    }
    b.Key(schema::kKeyHandle);
    AppendJsonHex(b, reinterpret_cast<uintptr_t>(handle));
    b.Key(schema::kKeyOk).Str(Bool(ok)).Key(schema::kKeyErrno).Dec(ok ? 0 : err);
  });
}

void LogRdmaInit(RdmaCall call, const char* device, const RawStack& stack, const PythonStack* py) {
  EventLog& log = GlobalEventLog();
  EventLog::LargeLine line(log);
  if (!line.ok()) return;
  TextBuffer& b = line.text();
  log.Begin(b, schema::kRdmaInit);
  b.Key(schema::kKeyCall).Quoted(RdmaCallName(call)).Key(schema::kKeyDevice);
  AppendNullableStr(b, device);
  AppendStackRef(b, log, schema::kKeyStack, stack, py, line.owns_lock());
  log.End(b);
}

void LogMrRegister(const MrRecord& rec, bool dontfork) {
  EventLog& log = GlobalEventLog();
  if (!log.enabled()) return;
  // A registration at a site this file has a line for is counted (mr_counts), not written.
  const char* call = rec.call != RdmaCall::kRegMr ? RdmaCallName(rec.call) : nullptr;
  uint64_t key = EventLog::RegistrationKey(rec.stack, call, dontfork);
  if (log.CountRegistration(key, rec.len)) return;
  // The first at its site: a line. The stack is written once per distinct stack of this
  // process (its record, with the module map, precedes this line). No symbolization here:
  // `forkguard report` does it from object + offset.
  uint32_t epoch = log.file_epoch();
  int stack_id = log.StackId(rec.stack, nullptr);
  char buf[1024];
  TextBuffer b(buf, sizeof(buf));
  log.Begin(b, schema::kMrRegister);
  b.Key(schema::kKeyMr).Char('[').UDec(rec.addr).Char(',').UDec(rec.len);
  b.Char(',').Dec(rec.access).Char(',').UDec(rec.handle).Char(']');
  b.Key(schema::kKeyStack);
  if (stack_id >= 0) {
    b.Dec(stack_id);
  } else {  // the table is busy (a signal handler on this thread) or full: inline
    b.Char('[');
    for (int i = 0; i < rec.stack.depth; ++i) {
      if (i > 0) b.Char(',');
      AppendJsonHex(b, rec.stack.ips[i]);
    }
    b.Char(']');
  }
  if (call != nullptr) b.Key(schema::kKeyCall).Quoted(call);
  if (dontfork) b.Key(schema::kKeyDontfork).Str("true");
  log.End(b);
  log.AddRegistrationSite(key, stack_id, call, dontfork, epoch);
}

void CountMrDeregister() { GlobalEventLog().CountDeregistration(); }

void FlushEventCounts() { GlobalEventLog().FlushCounts(); }

void LogMrDeregister(const void* mr) {
  WriteEvent<512>(schema::kMrDeregister, [&](TextBuffer& b) {
    b.Key(schema::kKeyHandle);
    AppendJsonHex(b, reinterpret_cast<uintptr_t>(mr));
    b.Key(schema::kKeyAddr)
        .Str("null")
        .Key(schema::kKeyLen)
        .Str("null");  // kept from when tracked MRs were logged too
  });
}

void LogForkInit(int ret, int err, const char* caller) {
  WriteEvent<512>(schema::kForkInit, [&](TextBuffer& b) {
    b.Key(schema::kKeyResult).Dec(ret).Key(schema::kKeyErrno).Dec(ret == 0 ? 0 : err);
    b.Key(schema::kKeyCaller);
    AppendNullableStr(b, caller);
  });
}

const char* ForkActionName(const ForkReport& r) {
  using namespace schema;  // the kAction* names
  if (r.mode == Mode::kOff) return kActionOff;
  // Allowed and suppressed sites, clean forks, and hazards the modes do not apply to proceed.
  if (r.allowed || r.suppressed != nullptr || !r.verdict.enforceable()) return kActionProceeded;
  switch (r.mode) {
    case Mode::kWarn:
      return kActionProceeded;
    case Mode::kError:
      return r.via == ForkVia::kAtfork ? kActionProceeded : kActionFailed;
    case Mode::kAbort:
      return kActionAborted;
    case Mode::kFix:
      return r.fix.failed_withhold ? kActionFailed
             : r.fix.changed()     ? kActionFixed
                                   : kActionProceeded;
    case Mode::kOff:
      return kActionOff;
  }
  return kActionProceeded;
}

void LogFork(const ForkReport& r, EventLog::LargeLine* line) {
  EventLog& log = GlobalEventLog();
  if (!log.enabled()) return;
  if (line != nullptr) {
    if (!line->ok()) return;
    TextBuffer& b = line->text();
    log.Begin(b, schema::kFork);
    AppendFork(b, log, line->owns_lock(), r);
    log.End(b);
    return;
  }
  if (r.partial) {
    // No stack to write and no lock to take: a small line on the (maybe signal) stack.
    char buf[1024];
    TextBuffer b(buf, sizeof(buf));
    log.Begin(b, schema::kFork);
    AppendFork(b, log, false, r);
    log.End(b);
    return;
  }
  EventLog::LargeLine own(log);
  LogFork(r, &own);
}

void LogForkChild(pid_t child) {
  WriteEvent<512>(schema::kForkChild,
                  [&](TextBuffer& b) { b.Key(schema::kKeyChildPid).Dec(child); });
}

void LogSpawn(const char* call, pid_t child, bool ok) {
  WriteEvent<512>(schema::kSpawn, [&](TextBuffer& b) {
    b.Key(schema::kKeyCall).Quoted(call).Key(schema::kKeyChildPid);
    if (ok && child > 0) {
      b.Dec(child);
    } else {
      b.Str("null");
    }
    b.Key(schema::kKeyOk).Str(Bool(ok)).Key(schema::kKeySafe).Str("true");
  });
}

void LogProcessExit() {
  EventLog& log = GlobalEventLog();
  if (!log.enabled()) return;
  char buf[512];
  TextBuffer b(buf, sizeof(buf));
  log.Begin(b, schema::kProcessExit);
  b.Key(schema::kKeyStatus).Str("null");
  log.End(b);  // with the counts, when they fit in one line
  log.FlushCounts();
}

}  // namespace forkguard
