/* fork_check: prints forkguard_fork_check()'s answer for this process as key=value lines
 * (a C user of api/forkguard.h; the tests run it under the shim and without it).
 * --proc: the fallback's answer even under the shim. */
#include <stdio.h>
#include <string.h>

#include "api/forkguard.h"

int main(int argc, char** argv) {
  struct forkguard_check_result r;
  memset(&r, 0, sizeof(r));
  r.size = sizeof(r);
  int proc = argc > 1 && strcmp(argv[1], "--proc") == 0;
  if ((proc ? forkguard_fork_check_proc(&r) : forkguard_fork_check(&r)) != 0) {
    perror("forkguard_fork_check");
    return 2;
  }
  printf("source=%s\nverdict=%s\nhazard=%d\ncontexts=%d\npds=%d\nmrs=%d\nuverbs_fds=%d\n",
         r.source == FORKGUARD_SOURCE_SHIM ? "shim" : "proc", r.verdict, r.hazard, r.contexts,
         r.pds, r.mrs, r.uverbs_fds);
  printf("init_site=%s\nfork_site=%s\ndetail=%s\n", r.init_site, r.fork_site, r.detail);
  return r.hazard;
}
