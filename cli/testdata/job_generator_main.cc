// job_generator DIR [--junk] [--ranks N] [--procs-per-rank N] [--hazard-ranks N]
//               [--hosts N] [--events-per-process N] [--sites N]
//               [--forks-per-process N]
// Writes a synthetic job's event logs into DIR and prints what it contains
// (the truth the report must match) as JSON on stdout.
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include "cli/json.h"
#include "cli/testdata/job_generator.h"

int main(int argc, char** argv) {
  using forkguard::cli::JsonValue;
  forkguard::cli::testdata::JobSpec spec;
  std::string dir;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() { return i + 1 < argc ? atoi(argv[++i]) : 0; };
    if (a == "--junk")
      spec.junk = true;
    else if (a == "--ranks")
      spec.ranks = next();
    else if (a == "--procs-per-rank")
      spec.procs_per_rank = next();
    else if (a == "--hazard-ranks")
      spec.hazard_ranks = next();
    else if (a == "--hosts")
      spec.hosts = next();
    else if (a == "--events-per-process")
      spec.events_per_process = next();
    else if (a == "--sites")
      spec.sites = next();
    else if (a == "--forks-per-process")
      spec.forks_per_process = next();
    else
      dir = a;
  }
  if (dir.empty()) {
    fprintf(stderr,
            "usage: job_generator DIR [--junk] [--ranks N] [--procs-per-rank N] "
            "[--hazard-ranks N] [--hosts N] [--events-per-process N] [--sites N] "
            "[--forks-per-process N]\n");
    return 2;
  }
  mkdir(dir.c_str(), 0700);
  try {
    auto t = forkguard::cli::testdata::WriteJob(dir, spec);
    JsonValue o = JsonValue::Object();
    o.Set("processes", JsonValue::Int(t.processes));
    o.Set("hosts", JsonValue::Int(t.hosts));
    o.Set("hazard_forks", JsonValue::Int(t.hazard_forks));
    o.Set("worker_site_hazard", JsonValue::Int(t.worker_site_hazard));
    o.Set("worker_site_hazard_processes", JsonValue::Int(t.worker_site_hazard_processes));
    o.Set("worker_site_clean", JsonValue::Int(t.worker_site_clean));
    o.Set("helper_hazard", JsonValue::Int(t.helper_hazard));
    o.Set("segv", JsonValue::Int(t.segv));
    o.Set("exec_children", JsonValue::Int(t.exec_children));
    o.Set("hazard_sites", JsonValue::Int(t.hazard_sites));
    o.Set("epoch_forks", JsonValue::Int(t.epoch_forks));
    printf("%s\n", forkguard::cli::WriteJson(o).c_str());
  } catch (const std::exception& e) {
    fprintf(stderr, "job_generator: %s\n", e.what());
    return 1;
  }
  return 0;
}
