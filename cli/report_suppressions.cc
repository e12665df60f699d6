#include "cli/report_suppressions.h"

#include <algorithm>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <vector>

#include "cli/format.h"
#include "cli/report_phrases.h"
#include "cli/stack_view.h"
#include "cli/symbolizer.h"
#include "flags/flags.h"

namespace forkguard::cli {
namespace {

unsigned KindBits(const std::vector<std::string>& reasons) {
  unsigned bits = 0;
  for (unsigned bit = 1; bit <= kSuppressAllKinds; bit <<= 1) {
    const char* name = SuppressionKindName(bit);
    for (const auto& r : reasons)
      if (name != nullptr && r == name) bits |= bit;
  }
  return bits;
}

// The frames of a stack as the shim's matcher sees them (pointers into `st` and `names`).
std::vector<SuppressionFrameFacts> FactsOf(const Stack& st, std::vector<std::string>* names) {
  names->clear();
  names->reserve(st.size());
  std::vector<SuppressionFrameFacts> out;
  for (const Frame& f : st) {
    SuppressionFrameFacts x;
    if (f.python) {
      x.func = f.py_func.c_str();
      x.file = f.py_file.c_str();
      x.line = static_cast<int>(f.py_line);
      names->emplace_back();
    } else {
      x.func = !f.sym.empty() ? f.sym.c_str() : nullptr;
      // The symbolizer's name (static functions too), else the dynamic symbol demangled.
      names->push_back(!f.func.empty() ? f.func : Demangle(f.sym));
      x.demangled = names->back().c_str();
      x.lib = f.obj.empty() ? nullptr : f.obj.c_str();
      x.file = f.src_file.empty() ? nullptr : f.src_file.c_str();
      x.line = f.src_line;
    }
    out.push_back(x);
  }
  return out;
}

std::string SiteKey(const ForkSite& s, const Stack& st, const std::string& job) {
  return (s.site.empty() ? std::to_string(st.size()) + ":" + SiteHeading(st) : s.site) + "|" + job;
}

// Takes the hazardous forks of site `s` out of the timeline's hazard bins: the bins its
// forks fall in (first to last), earliest first; they stay counted as forks.
void UnbinHazards(const ForkSite& s, ForkHistogram* h) {
  if (h->hazard.empty() || h->width_ns <= 0) return;
  int64_t left = s.hazard;
  auto bin = [&](int64_t ts) {
    // Unsigned offset: exact for any ts > t0_ns (ForkHistogram::Add bins the same way).
    uint64_t b = ts <= h->t0_ns ? 0
                                : (static_cast<uint64_t>(ts) - static_cast<uint64_t>(h->t0_ns)) /
                                      static_cast<uint64_t>(h->width_ns);
    return static_cast<size_t>(std::min<uint64_t>(b, h->hazard.size() - 1));
  };
  for (size_t b = bin(s.first_ts_ns); b <= bin(s.last_ts_ns) && left > 0; ++b) {
    int64_t take = std::min(left, h->hazard[b]);
    h->hazard[b] -= take;
    left -= take;
  }
}

// One frame= value of an emitted entry for `name` (a function, file or library name from the
// logs, which any process can put there): a pattern that matches `name` and that the parser
// reads back exactly, quoted as the shim's own canonical text is. The name's own glob
// characters (and NUL, and in a file name ':', which would start a line number) become '?', so
// a name widens its entry to names of its length, never to a catch-all; a name longer than a
// pattern is cut and ends in '*'. "" for an empty name (no frame).
std::string FrameValue(const char* prefix, const std::string& name, bool file) {
  constexpr size_t kMax = SuppressionFrameMatch::kMaxPattern - 1;
  std::string pattern;
  for (char c : name) {
    if (pattern.size() == kMax) {
      pattern.back() = '*';
      break;
    }
    bool wild = c == '*' || c == '?' || c == '\0' || (file && c == ':');
    pattern += wild ? '?' : c;
  }
  if (pattern.empty()) return "";
  std::string value = prefix + pattern;
  char quoted[4 * (SuppressionFrameMatch::kMaxPattern + 16) + 3];
  if (!QuoteSuppressionValue(value.c_str(), quoted, sizeof quoted)) return "";
  return quoted;
}

// A comment's text on one line: control characters as \xNN.
std::string CommentText(const std::string& s) {
  std::string out;
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      static const char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 0xf];
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

SuppressionFile LoadSuppressionFile(const std::string& path, const char* program) {
  std::string text, error;
  if (!ReadInputFile(path, kMaxInputBytes, &text, &error))
    throw flags::UsageError("cannot read the suppression file " + path + " (" + error + ")");
  SuppressionFile f;
  f.path = path;
  f.set = std::make_unique<SuppressionSet>();
  struct Ctx {
    const std::string* path;
    const char* program;
  } ctx{&path, program};
  int bad = ParseSuppressions(
      text.data(), text.size(), f.set.get(),
      [](int line, const char* what, void* p) {
        auto* c = static_cast<Ctx*>(p);
        std::cerr << c->program << ": " << *c->path << ":" << line << ": " << what << "\n";
      },
      &ctx);
  if (bad > 0)
    throw BadSuppressionFile(path + ": " + std::to_string(bad) + " bad line" +
                             (bad == 1 ? "" : "s"));
  return f;
}

void ApplySuppressions(LogSet* logs, const SuppressionFile* file, Symbolizer* sym,
                       SuppressionTally* tally) {
  std::vector<std::string> names;
  for (ProcessLog& pl : logs->processes) {
    auto& uses = (*tally)[pl.job];
    // The reader tallies forks per site (stack, verdict, the shim's suppression): the decision
    // is per site, as the shim's is (its stack, verdict reasons, program and rank).
    for (ForkSite& fs : pl.fork_sites) {
      const Stack& st = pl.StackAt(fs.stack);
      if (!fs.suppressed.empty()) {  // by the shim, at run time
        fs.verdict = kVerdictSuppressed;
        fs.hazard = 0;
        SuppressionUse& u = uses[fs.suppressed];
        u.text = fs.suppressed;
        u.forks += fs.count;
        u.sites.insert(SiteKey(fs, st, pl.job));
        continue;
      }
      if (file == nullptr || fs.verdict != schema::kVerdictHazard) continue;
      if (sym != nullptr && fs.stack >= 0 && fs.stack < static_cast<int>(pl.stacks.size()))
        sym->Symbolize(&pl.stacks[static_cast<size_t>(fs.stack)]);
      std::vector<SuppressionFrameFacts> facts = FactsOf(st, &names);
      std::vector<std::string> reasons;
      for (const auto& [reason, n] : fs.reasons) reasons.push_back(reason);
      SuppressionQuery q;
      q.kinds = KindBits(reasons);
      q.program = pl.prog.c_str();
      q.rank = pl.rank ? static_cast<long>(*pl.rank) : -1;
      q.frames = facts.data();
      q.frame_count = static_cast<int>(facts.size());
      int at = MatchSuppression(*file->set, q);
      if (at < 0) continue;
      const Suppression& s = file->set->entries[at];
      UnbinHazards(fs, &pl.fork_bins);
      fs.verdict = kVerdictSuppressed;
      fs.suppressed = s.text;
      fs.hazard = 0;
      SuppressionUse& u = uses[s.text];
      u.text = s.text;
      u.line = s.source_line;
      u.forks += fs.count;
      u.sites.insert(SiteKey(fs, st, pl.job));
    }
  }
}

void FillSuppressionUse(const SuppressionTally& tally, const SuppressionFile* file,
                        const std::string* job, JobReport* r) {
  std::map<std::string, SuppressionUse> merged;
  for (const auto& [id, uses] : tally) {
    if (job != nullptr && id != *job) continue;
    for (const auto& [text, u] : uses) {
      SuppressionUse& m = merged[text];
      m.text = text;
      m.forks += u.forks;
      m.sites.insert(u.sites.begin(), u.sites.end());
    }
  }
  r->suppressions.clear();
  if (file != nullptr) {
    r->suppressions_file = file->path;
    for (int i = 0; i < file->set->count; ++i) {
      const Suppression& s = file->set->entries[i];
      SuppressionUse u;
      if (auto it = merged.find(s.text); it != merged.end()) {
        u = std::move(it->second);
        merged.erase(it);
      }
      u.text = s.text;
      u.line = s.source_line;
      r->suppressions.push_back(std::move(u));
    }
  }
  for (auto& [text, u] : merged) r->suppressions.push_back(std::move(u));
}

std::string EmitSuppressions(const JobReport& r) {
  std::string out =
      "# forkguard suppressions: one entry per hazardous fork site of this report.\n"
      "# Use with FORKGUARD_SUPPRESSIONS=FILE (the shim) or forkguard report --suppressions "
      "FILE.\n";
  std::set<std::string> written;
  for (const ForkGroup& g : r.hazard_groups) {
    // Only the kinds the parser knows (a log may name anything).
    std::string kinds;
    for (const auto& [reason, n] : g.reasons) {
      for (unsigned bit = 1; bit <= kSuppressAllKinds; bit <<= 1) {
        const char* name = SuppressionKindName(bit);
        if (name != nullptr && reason == name) kinds += (kinds.empty() ? "" : ",") + reason;
      }
    }
    if (kinds.empty()) continue;
    const Stack& st = g.stack;
    StackView v = ViewStack(st);
    std::string frames;
    auto add = [&](const std::string& value) {
      if (!value.empty()) frames += " frame=" + value;
    };
    if (v.head >= 0 && st[v.head].python) {
      const Frame& f = st[v.head];
      add(FrameValue("func:", f.py_func, false));
      add(FrameValue("file:", Basename(f.py_file), true));
    } else {
      // The named site's function, or its first caller with a name outside libc and the
      // RDMA libraries (the dynamic symbol first: the shim knows only those); and the site's
      // object. Without a name, the object alone (every such fork in it).
      int at = v.head >= 0 ? v.head : 0;
      std::string func;
      for (int i = at; i < static_cast<int>(st.size()) && func.empty(); ++i)
        if (!IsPlumbingFrame(st[i])) func = !st[i].sym.empty() ? st[i].sym : st[i].func;
      add(FrameValue("func:", func, false));
      if (at < static_cast<int>(st.size())) add(FrameValue("lib:", Basename(st[at].obj), false));
    }
    if (frames.empty()) continue;
    std::string entry = "kind=" + kinds + frames;
    if (!written.insert(entry).second) continue;
    std::string where = SiteLabel(st);
    out += "\n# " +
           CommentText((where.empty() ? std::string("site ") + g.site : where) + ": ×" +
                       std::to_string(g.count) + " " + ProcessesPhrase(g)) +
           "\n" + entry + "\n";
  }
  return out;
}

std::string SuppressionsText(const JobReport& r, size_t width) {
  if (r.suppressions.empty() && r.suppressed_groups.empty()) return "";
  std::string out =
      "\n" +
      Fit("suppressed: " + Plural(r.suppressed_forks, "hazardous fork", "hazardous forks") +
              " at " +
              Plural(static_cast<int64_t>(r.suppressed_groups.size()), "call site", "call sites") +
              (r.suppressions_file.empty() ? "" : " (" + r.suppressions_file + ")"),
          width) +
      "\n";
  for (const SuppressionUse& u : r.suppressions) {
    std::string where = u.line > 0 ? "line " + std::to_string(u.line) : "by the shim";
    std::string use = u.forks > 0
                          ? Plural(u.forks, "fork", "forks") + " at " +
                                Plural(static_cast<int64_t>(u.sites.size()), "site", "sites")
                          : "never used";
    out += Wrap("  " + where + ": " + use + ":", "      ", u.text, width);
  }
  for (const ForkGroup& g : r.suppressed_groups) {
    std::string loc = SiteHeading(g.stack);
    out += Fit("  " + (loc.empty() ? "<unknown call site>" : loc) + " ×" + std::to_string(g.count) +
                   " " + ProcessesPhrase(g),
               width) +
           "\n";
  }
  return out;
}

void AddSuppressionsJson(const JobReport& r, Json* report) {
  if (r.suppressions.empty() && r.suppressions_file.empty()) return;
  Json o = Json::object();
  o["file"] = r.suppressions_file.empty() ? Json() : Json(r.suppressions_file);
  o["suppressed_forks"] = r.suppressed_forks;
  Json entries = Json::array();
  for (const SuppressionUse& u : r.suppressions) {
    Json x = Json::object();
    x["line"] = u.line > 0 ? Json(u.line) : Json();
    x["entry"] = u.text;
    x["forks"] = u.forks;
    x["sites"] = static_cast<int64_t>(u.sites.size());
    x["used"] = u.forks > 0;
    entries.push_back(std::move(x));
  }
  o["entries"] = std::move(entries);
  (*report)["suppressions"] = std::move(o);
}

}  // namespace forkguard::cli
