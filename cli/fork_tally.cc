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

}  // namespace

void TallyFork(const Event& e, ForkTally* tally, ProcessLog* p) {
  std::string& key = tally->site_key;  // reused: no allocation for a site already met
  key.assign(e.verdict).append(1, '\x1f').append(e.site).append(1, '\x1f');
  if (e.site.empty()) key.append(std::to_string(e.stack));
  key.append(1, '\x1f').append(e.suppressed);
  auto it = tally->site_ids.find(key);
  if (it == tally->site_ids.end()) {
    it = tally->site_ids.emplace(key, static_cast<int>(p->fork_sites.size())).first;
    ForkSite fs;
    fs.verdict = e.verdict;
    fs.site = e.site;
    fs.stack = e.stack;
    fs.suppressed = e.suppressed;
    fs.first_ts_ns = e.ts_ns;
    p->fork_sites.push_back(std::move(fs));
  }
  ForkSite& s = p->fork_sites[static_cast<size_t>(it->second)];
  // A hazard the shim suppressed counts as such in the site (ApplySuppressions moves the
  // site to "suppressed"), not in the timeline's hazard bins.
  bool hazard = e.verdict == schema::kVerdictHazard;
  ++s.count;
  if (hazard) ++s.hazard;
  s.first_ts_ns = std::min(s.first_ts_ns, e.ts_ns);
  s.last_ts_ns = std::max(s.last_ts_ns, e.ts_ns);
  for (const auto& r : e.reasons) ++s.reasons[r];
  ++s.actions[e.action];
  if (!e.via.empty()) ++s.via[e.via];
  if (s.fix.empty() && !e.fix.empty()) {
    s.fix = e.fix;
    s.fix_library = e.fix_library;
  }
  s.fix_tally.Take(e.fix_tally);
  if ((e.action == schema::kActionFailed || e.action == schema::kActionRefused) &&
      !e.errno_text.empty() && s.errnos.size() < kMaxErrnos &&
      std::find(s.errnos.begin(), s.errnos.end(), e.errno_text) == s.errnos.end())
    s.errnos.push_back(e.errno_text);
  if (e.has_init) {
    if (e.init_age_ms >= 0) {
      s.min_age_ms = s.min_age_ms < 0 ? e.init_age_ms : std::min(s.min_age_ms, e.init_age_ms);
      s.max_age_ms = std::max(s.max_age_ms, e.init_age_ms);
    }
    if (!s.has_init) {
      s.has_init = true;
      s.init_call = e.init_call;
      s.init_device = e.init_device;
      s.init_stack = e.init_stack;
    }
  }
  s.Take(e.ranges, e.range_bytes, e.dontfork_ranges, e.threads, e.kernel_cof);

  int64_t ordinal = p->forks++;
  if (p->first_fork_ns == 0 || (e.ts_ns > 0 && e.ts_ns < p->first_fork_ns))
    p->first_fork_ns = e.ts_ns;
  p->last_fork_ns = std::max(p->last_fork_ns, e.ts_ns);
  p->fork_bins.Add(e.ts_ns, hazard && e.suppressed.empty());
  // The first forks join the sample; the newest wait in a ring (its slots reused).
  ForkSample* f;
  if (p->fork_sample.size() < ProcessLog::kForkSampleHead) {
    f = &p->fork_sample.emplace_back();
  } else if (tally->tail.size() < ProcessLog::kForkSampleTail) {
    f = &tally->tail.emplace_back();
  } else {
    f = &tally->tail[tally->tail_next];
    tally->tail_next = (tally->tail_next + 1) % ProcessLog::kForkSampleTail;
  }
  f->ts_ns = e.ts_ns;
  f->tid = e.tid;
  f->line = e.line;
  f->site = it->second;
  f->ordinal = ordinal;
  f->action.assign(e.action);
  f->reasons.assign(e.reasons.begin(), e.reasons.end());
  f->child_pid = -1;
  if (tally->pending.size() >= kMaxPending) tally->pending.erase(tally->pending.begin());
  tally->pending.push_back({it->second, e.ts_ns, ordinal});
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
