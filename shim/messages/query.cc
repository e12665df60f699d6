#include "shim/messages/query.h"

#include <cstring>

#include "api/check_result.h"
#include "formats/text_buffer.h"
#include "shim/stack/stack.h"

namespace forkguard {
namespace {

int CofValue(KernelCof c) {
  switch (c) {
    case KernelCof::kYes:
      return FORKGUARD_COF_YES;
    case KernelCof::kNo:
      return FORKGUARD_COF_NO;
    case KernelCof::kUnknown:
      break;
  }
  return FORKGUARD_COF_UNKNOWN;
}

// The forkguard Python module's own frames (forkguard.check() and its callers in the
// package): the call site is the first frame outside it.
bool InForkguardModule(const char* file) {
  size_t n = strlen(file);
  for (const char* tail : {"/forkguard/__init__.py", "/forkguard/torch.py"}) {
    size_t t = strlen(tail);
    if (n >= t && strcmp(file + n - t, tail) == 0) return true;
  }
  return false;
}

// A site: `File "f", line n, in func` for the innermost Python frame (outside the forkguard
// module) when the thread runs Python, else the innermost native frame outside the RDMA
// libraries and forkguard.
void AppendSite(TextBuffer& b, const RawStack& stack, const PythonStack* py) {
  if (py != nullptr) {
    for (int i = 0; i < py->depth; ++i) {
      const PythonStack::Frame& f = py->frames[i];
      if (InForkguardModule(f.file)) continue;
      b.Str("File \"").Str(f.file).Str("\", line ").Dec(f.line).Str(", in ").Str(f.func);
      return;
    }
  }
  FormatInnermostUserFrame(b, stack, /*demangle=*/true);
}

void CommonFacts(forkguard_check_result* out) {
  out->vm_pin_kb = api::ReadVmPinKb("self");
  KernelCofFact cof = CachedKernelCopyOnFork();
  if (cof.value == KernelCof::kUnknown) cof = KernelCopyOnFork();
  out->kernel_cof = CofValue(cof.value);
  api::CopyField(out->kernel_cof_source, sizeof(out->kernel_cof_source),
                 cof.source != nullptr ? cof.source : "unknown");
}

}  // namespace

void FillCleanQueryResult(forkguard_check_result* out, const RdmaFds& fds) {
  api::ResetResult(out, FORKGUARD_SOURCE_SHIM);
  api::SetVerdict(out, 0);
  out->contexts = out->pds = out->mrs = out->cm_ids = out->cm_channels = 0;
  out->uverbs_fds = fds.uverbs;
  out->rdma_cm_fds = fds.rdma_cm;
  out->dontfork_mrs = out->corruptible_mrs = out->unattributed_dc = 0;
  out->range_count = out->range_total = 0;
  CommonFacts(out);
}

void FillQueryResult(forkguard_check_result* out, const ForkReport& r, const char* message) {
  api::ResetResult(out, FORKGUARD_SOURCE_SHIM);
  api::SetVerdict(out, r.verdict.reasons);
  out->enforceable = r.verdict.enforceable() ? 1 : 0;
  const StateSnapshot& s = *r.snap;
  const LiveCounts& c = s.counts;
  out->contexts = c.contexts;
  out->pds = c.pds;
  out->mrs = c.mrs;
  out->cm_ids = c.cm_ids;
  out->cm_channels = c.cm_channels;
  out->uverbs_fds = c.uverbs_fds;
  out->rdma_cm_fds = c.rdma_cm_fds;
  out->dc_vmas = r.dc_count;
  out->dontfork_mrs = r.verdict.dontfork_mrs;
  out->corruptible_mrs = r.verdict.corruptible_mrs;
  out->unattributed_dc = r.verdict.unattributed_dc;
  CommonFacts(out);
  if (r.cof.value != KernelCof::kUnknown) {
    out->kernel_cof = CofValue(r.cof.value);
    api::CopyField(out->kernel_cof_source, sizeof(out->kernel_cof_source), r.cof.source);
  }

  BeginSymbolizing();
  out->range_total = s.mr_count;
  for (int i = 0; i < s.mr_count && out->range_count < FORKGUARD_MAX_RANGES; ++i) {
    const MrRecord& m = s.mrs[i];
    forkguard_range& g = out->ranges[out->range_count++];
    g.start = m.addr;
    g.length = m.len;
    g.dontfork = r.mr_dontfork != nullptr && r.mr_dontfork[i] ? 1 : 0;
    // The rule's answer for this range (facts/fork_rule.h), as the verdict counted it.
    g.corruptible =
        r.mr_fate != nullptr && r.mr_fate[i].verdict.effect == facts::ForkEffect::kParentCorruption
            ? 1
            : 0;
    api::CopyField(g.call, sizeof(g.call), RdmaCallName(m.call));
    TextBuffer site(g.site, sizeof(g.site));
    FormatInnermostUserFrame(site, m.stack, /*demangle=*/true);
  }
  if (s.init.set) {
    TextBuffer b(out->init_site, sizeof(out->init_site));
    b.Str(RdmaCallName(s.init.call));
    if (s.init.device[0] != '\0') b.Char('(').Str(s.init.device).Char(')');
    b.Str(" at ");
    AppendSite(b, s.init.stack, &s.init.py);
  }
  if (r.fork_stack != nullptr) {
    TextBuffer b(out->fork_site, sizeof(out->fork_site));
    AppendSite(b, *r.fork_stack, r.fork_py);
  }
  if (message != nullptr) api::CopyField(out->message, sizeof(out->message), message);
}

}  // namespace forkguard
