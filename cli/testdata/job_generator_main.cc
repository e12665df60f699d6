// job_generator DIR [--junk] [--ranks N] [--procs-per-rank N] [--hazard-ranks N]
//               [--hosts N] [--events-per-process N] [--sites N]
//               [--forks-per-process N] [--job ID]
// Writes a synthetic job's event logs into DIR and prints what it contains
// (the truth the report must match) as JSON on stdout.
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iterator>
#include <string>
#include <string_view>
#include <utility>

#include "cli/json.h"
#include "cli/testdata/job_generator.h"

int main(int argc, char** argv) {
  using forkguard::cli::Json;
  using forkguard::cli::testdata::JobSpec;
  // The options that take a number, and the field of the spec each sets.
  static constexpr std::pair<std::string_view, int JobSpec::*> kNumberOptions[] = {
      {"--ranks", &JobSpec::ranks},
      {"--procs-per-rank", &JobSpec::procs_per_rank},
      {"--hazard-ranks", &JobSpec::hazard_ranks},
      {"--hosts", &JobSpec::hosts},
      {"--events-per-process", &JobSpec::events_per_process},
      {"--sites", &JobSpec::sites},
      {"--forks-per-process", &JobSpec::forks_per_process},
  };
  JobSpec spec;
  std::string dir;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    const auto* number = std::find_if(std::begin(kNumberOptions), std::end(kNumberOptions),
                                      [&](const auto& o) { return o.first == a; });
    if (a == "--junk")
      spec.junk = true;
    else if (number != std::end(kNumberOptions))
      spec.*(number->second) = i + 1 < argc ? atoi(argv[++i]) : 0;
    else if (a == "--job" && i + 1 < argc)
      spec.job = argv[++i];
    else
      dir = a;
  }
  if (dir.empty()) {
    fprintf(stderr,
            "usage: job_generator DIR [--junk] [--ranks N] [--procs-per-rank N] "
            "[--hazard-ranks N] [--hosts N] [--events-per-process N] [--sites N] "
            "[--forks-per-process N] [--job ID]\n");
    return 2;
  }
  mkdir(dir.c_str(), 0700);
  try {
    auto t = forkguard::cli::testdata::WriteJob(dir, spec);
    Json o = Json::object();
    o["processes"] = t.processes;
    o["hosts"] = t.hosts;
    o["hazard_forks"] = t.hazard_forks;
    o["worker_site_hazard"] = t.worker_site_hazard;
    o["worker_site_hazard_processes"] = t.worker_site_hazard_processes;
    o["worker_site_clean"] = t.worker_site_clean;
    o["helper_hazard"] = t.helper_hazard;
    o["segv"] = t.segv;
    o["exec_children"] = t.exec_children;
    o["hazard_sites"] = t.hazard_sites;
    o["epoch_forks"] = t.epoch_forks;
    printf("%s\n", forkguard::cli::WriteJson(o).c_str());
  } catch (const std::exception& e) {
    fprintf(stderr, "job_generator: %s\n", e.what());
    return 1;
  }
  return 0;
}
