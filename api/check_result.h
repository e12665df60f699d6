// Helpers that fill a forkguard_check_result, shared by the shim's answer (shim/messages/query.cc)
// and the /proc fallback (api/check.cc) so that both spell the verdict the same way (the
// reason names are shim/verdict/verdict.h's). libc only, no allocation.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstring>

#include "api/forkguard.h"
#include "shim/verdict/verdict.h"

namespace forkguard::api {

static_assert(FORKGUARD_CHILD_SEGV == kChildSegv &&
              FORKGUARD_PARENT_CORRUPTION == kParentCorruption &&
              FORKGUARD_INHERITED_RDMA == kInheritedRdma);

// The shim's reason names ("child-segv", ...); null for anything else.
inline const char* ReasonText(unsigned reason) {
  if (reason != kChildSegv && reason != kParentCorruption && reason != kInheritedRdma) {
    return nullptr;
  }
  return ReasonName(static_cast<Reason>(reason));
}

inline void CopyField(char* dst, size_t cap, const char* src) {
  if (cap == 0) return;
  size_t n = src != nullptr ? strnlen(src, cap - 1) : 0;
  if (n > 0) memcpy(dst, src, n);
  dst[n] = '\0';
}

// Everything zero, counts unknown (-1), size set.
inline void ResetResult(forkguard_check_result* r, int source) {
  memset(r, 0, sizeof(*r));
  r->size = sizeof(*r);
  r->source = source;
  int* counts[] = {&r->contexts,
                   &r->pds,
                   &r->mrs,
                   &r->qps,
                   &r->cm_ids,
                   &r->cm_channels,
                   &r->uverbs_fds,
                   &r->rdma_cm_fds,
                   &r->dc_vmas,
                   &r->dontfork_mrs,
                   &r->corruptible_mrs,
                   &r->unattributed_dc,
                   &r->orphan_objects};
  for (int* c : counts) *c = -1;
  r->vm_pin_kb = -1;
  r->kernel_cof = FORKGUARD_COF_UNKNOWN;
  CopyField(r->kernel_cof_source, sizeof(r->kernel_cof_source), "unknown");
}

// Sets reasons, hazard and the verdict text: "clean" or "hazard (child-segv, ...)".
inline void SetVerdict(forkguard_check_result* r, unsigned reasons) {
  r->reasons = reasons;
  r->hazard = reasons != 0 ? 1 : 0;
  if (reasons == 0) {
    CopyField(r->verdict, sizeof(r->verdict), "clean");
    return;
  }
  char text[96] = "hazard (";
  bool first = true;
  for (unsigned bit :
       {FORKGUARD_CHILD_SEGV, FORKGUARD_PARENT_CORRUPTION, FORKGUARD_INHERITED_RDMA}) {
    if ((reasons & bit) == 0) continue;
    if (!first) strcat(text, ", ");
    strcat(text, ReasonText(bit));
    first = false;
  }
  strcat(text, ")");
  CopyField(r->verdict, sizeof(r->verdict), text);
}

// A "Key:   1234 kB" line of a /proc/PID/status text, in kB; -1 when absent.
inline long StatusKb(const char* text, const char* key) {
  size_t klen = strlen(key);
  for (const char* p = text; p != nullptr && *p != '\0';) {
    if (strncmp(p, key, klen) == 0 && p[klen] == ':') {
      const char* q = p + klen + 1;
      while (*q == ' ' || *q == '\t') ++q;
      if (*q < '0' || *q > '9') return -1;
      long v = 0;
      while (*q >= '0' && *q <= '9') v = v * 10 + (*q++ - '0');
      return v;
    }
    p = strchr(p, '\n');
    if (p != nullptr) ++p;
  }
  return -1;
}

// VmPin of a process ("self" or a pid) in kB; -1 when unreadable.
inline long ReadVmPinKb(const char* pid) {
  char path[64] = "/proc/";
  strncat(path, pid, 32);
  strcat(path, "/status");
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char buf[8192];
  size_t used = 0;
  for (;;) {
    ssize_t n = read(fd, buf + used, sizeof(buf) - 1 - used);
    if (n <= 0) break;
    used += static_cast<size_t>(n);
    if (used == sizeof(buf) - 1) break;
  }
  close(fd);
  buf[used] = '\0';
  return StatusKb(buf, "VmPin");
}

// Copies `full` into the caller's struct, up to the size the caller said it has.
inline int CopyOut(const forkguard_check_result& full, forkguard_check_result* out) {
  uint32_t size = out->size;
  size_t n = size < sizeof(full) ? size : sizeof(full);
  memcpy(out, &full, n);
  out->size = size;
  return 0;
}

// The smallest size a caller may pass: the fields up to and including `verdict`.
constexpr size_t kMinResultSize = offsetof(forkguard_check_result, verdict) + 96;

}  // namespace forkguard::api
