#include "cli/unwatched.h"

#include <algorithm>

#include "cli/format.h"

namespace forkguard::cli {

std::string UnwatchedWhy(const std::string& reason) {
  if (reason == "preload-removed") return "its environment has no LD_PRELOAD with the shim";
  if (reason == "static") return "a static binary (no dynamic loader: nothing is preloaded)";
  if (reason == "setuid") {
    return "set-user/group-ID (AT_SECURE: the loader ignores the shim's preload)";
  }
  return reason;
}

std::string UnwatchedRdmaState(const UnwatchedProcess& u) {
  return !u.held_rdma ? "unknown" : *u.held_rdma ? "held (inherited)" : "none";
}

std::vector<UnwatchedProcess> FindUnwatched(const LogSet& logs) {
  std::vector<UnwatchedProcess> out;
  for (const ProcessLog& p : logs.processes) {
    for (const Event& e : p.events)
      if (const auto* x = e.As<UnwatchedExec>()) out.push_back({*x, p.host, p.pid, p.ppid, p.prog});
  }
  std::sort(out.begin(), out.end(), [](const UnwatchedProcess& a, const UnwatchedProcess& b) {
    return a.host != b.host ? a.host < b.host : a.pid < b.pid;
  });
  return out;
}

std::string FormatUnwatched(const std::vector<UnwatchedProcess>& list, bool markdown) {
  if (list.empty()) return "";
  std::string out = "\nunwatched: " + std::to_string(list.size()) +
                    (list.size() == 1 ? " process" : " processes") +
                    " of this run ran without the shim: their forks were not seen, so \"0 "
                    "hazardous\" does not cover them\n";
  // Names and reasons come from the logs: escaped, each stays on its line (and in Markdown
  // makes no link or markup).
  auto esc = [markdown](const std::string& v) {
    return markdown ? MarkdownText(v) : EscapeText(v);
  };
  for (const UnwatchedProcess& u : list) {
    out += "  pid " + std::to_string(u.pid) + " " + esc(u.prog + " (" + u.path + ") on " + u.host) +
           ", parent " + std::to_string(u.ppid) + ", exec'd by " + esc(u.exec_by) + ":\n";
    for (const std::string& w : u.why) out += "      " + esc(UnwatchedWhy(w)) + "\n";
    out += "      RDMA state when it exec'd: " + UnwatchedRdmaState(u);
    out += "; after that: not watched (forkguard ps shows what it holds while it runs)\n";
  }
  return out;
}

}  // namespace forkguard::cli
