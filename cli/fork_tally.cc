// Tallying forks per site, with a bounded sample, as their lines are read.
#include "cli/fork_tally.h"

#include <algorithm>
#include <cstddef>

namespace forkguard::cli {
namespace {

// A fork_child line waits for the newest fork of its process without a child; this many
// forks without one are remembered (failed forks never get one), the oldest dropped.
constexpr size_t kMaxPending = 256;
constexpr size_t kMaxErrnos = 16;

// The index in p->fork_sites of the site of fork `f` at `ts_ns`, made on first sight.
int SiteOf(const Fork& f, int64_t ts_ns, ForkTally* tally, ProcessLog* p) {
  std::string& key = tally->site_key;  // reused: no allocation for a site already met
  key.assign(f.verdict).append(1, '\x1f').append(f.site).append(1, '\x1f');
  if (f.site.empty()) key.append(std::to_string(f.stack));
  key.append(1, '\x1f').append(f.suppressed);
  auto it = tally->site_ids.find(key);
  if (it == tally->site_ids.end()) {
    it = tally->site_ids.emplace(key, static_cast<int>(p->fork_sites.size())).first;
    ForkSite& s = p->fork_sites.emplace_back();
    s.verdict = f.verdict;
    s.site = f.site;
    s.stack = f.stack;
    s.suppressed = f.suppressed;
    s.first_ts_ns = ts_ns;
  }
  return it->second;
}

// Fork `f` at `ts_ns` counted in its site `s`.
void TakeFork(const Fork& f, int64_t ts_ns, ForkSite* site) {
  ForkSite& s = *site;
  ++s.count;
  if (f.verdict == schema::kVerdictHazard) ++s.hazard;
  s.first_ts_ns = std::min(s.first_ts_ns, ts_ns);
  s.last_ts_ns = std::max(s.last_ts_ns, ts_ns);
  for (const auto& r : f.reasons) ++s.reasons[r];
  ++s.actions[f.action];
  if (!f.via.empty()) ++s.via[f.via];
  if (s.fix.empty() && !f.fix.empty()) {
    s.fix = f.fix;
    s.fix_library = f.fix_library;
  }
  s.fix_tally.Take(f.fix_tally);
  if ((f.action == schema::kActionFailed || f.action == schema::kActionRefused) &&
      !f.errno_text.empty() && s.errnos.size() < kMaxErrnos &&
      std::find(s.errnos.begin(), s.errnos.end(), f.errno_text) == s.errnos.end())
    s.errnos.push_back(f.errno_text);
  if (f.init) {
    const Fork::Init& in = *f.init;
    if (in.age_ms >= 0) {
      s.min_age_ms = s.min_age_ms < 0 ? in.age_ms : std::min(s.min_age_ms, in.age_ms);
      s.max_age_ms = std::max(s.max_age_ms, in.age_ms);
    }
    if (!s.has_init) {
      s.has_init = true;
      s.init_call = in.call;
      s.init_device = in.device;
      s.init_stack = in.stack;
    }
  }
  s.Take(f.ranges, f.range_bytes, f.dontfork_ranges, f.threads, f.kernel_cof);
}

}  // namespace

void TallyFork(const Event& e, const Fork& f, ForkTally* tally, ProcessLog* p) {
  int site = SiteOf(f, e.ts_ns, tally, p);
  TakeFork(f, e.ts_ns, &p->fork_sites[static_cast<size_t>(site)]);
  int64_t ordinal = p->forks++;
  if (p->first_fork_ns == 0 || (e.ts_ns > 0 && e.ts_ns < p->first_fork_ns))
    p->first_fork_ns = e.ts_ns;
  p->last_fork_ns = std::max(p->last_fork_ns, e.ts_ns);
  // A hazard the shim suppressed counts as such in the site (ApplySuppressions moves the
  // site to "suppressed"), not in the timeline's hazard bins.
  p->fork_bins.Add(e.ts_ns, f.verdict == schema::kVerdictHazard && f.suppressed.empty());
  // The first forks join the sample; the newest wait in a ring (its slots reused).
  ForkSample* sample;
  if (p->fork_sample.size() < ProcessLog::kForkSampleHead) {
    sample = &p->fork_sample.emplace_back();
  } else if (tally->tail.size() < ProcessLog::kForkSampleTail) {
    sample = &tally->tail.emplace_back();
  } else {
    sample = &tally->tail[tally->tail_next];
    tally->tail_next = (tally->tail_next + 1) % ProcessLog::kForkSampleTail;
  }
  sample->ts_ns = e.ts_ns;
  sample->tid = e.tid;
  sample->line = e.line;
  sample->site = site;
  sample->ordinal = ordinal;
  sample->action.assign(f.action);
  sample->reasons.assign(f.reasons.begin(), f.reasons.end());
  sample->child_pid = -1;
  if (tally->pending.size() >= kMaxPending) tally->pending.erase(tally->pending.begin());
  tally->pending.push_back({site, e.ts_ns, ordinal});
}

void TallyForkChild(int64_t child_pid, const WithLogs* with_logs, ForkTally* tally, ProcessLog* p) {
  ++p->fork_children;
  if (tally->pending.empty()) return;
  ForkTally::Pending f = tally->pending.back();
  tally->pending.pop_back();
  ++p->fork_sites[static_cast<size_t>(f.site)].children;
  if (static_cast<size_t>(f.ordinal) < p->fork_sample.size()) {
    p->fork_sample[static_cast<size_t>(f.ordinal)].child_pid = child_pid;
  } else {
    for (ForkSample& s : tally->tail)
      if (s.ordinal == f.ordinal) s.child_pid = child_pid;
  }
  if (child_pid > 0 && (with_logs == nullptr || with_logs->count({p->host, child_pid})))
    p->child_links.push_back({child_pid, f.site, f.ts_ns});
}

void FinishForks(ForkTally* tally, ProcessLog* p) {
  std::rotate(tally->tail.begin(),
              tally->tail.begin() + static_cast<std::ptrdiff_t>(tally->tail_next),
              tally->tail.end());
  for (ForkSample& f : tally->tail) p->fork_sample.push_back(std::move(f));
  tally->tail.clear();
  tally->tail_next = 0;
  tally->pending.clear();
}

}  // namespace forkguard::cli
