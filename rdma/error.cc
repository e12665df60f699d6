#include "rdma/error.h"

#include <string.h>
#include <unistd.h>

namespace forkguard::rdma {

void ThrowCallError(const char* call, int err, const std::string& detail) {
  std::string msg =
      std::string(call) + ": " + strerror(err) + " (errno " + std::to_string(err) + ")";
  if (!detail.empty()) msg += "; " + detail;
  throw TransportError(msg);
}

CreatorPid::CreatorPid() : pid_(getpid()) {}

bool CreatorPid::InCreator() const { return getpid() == pid_; }

void CreatorPid::Check(const char* object) const {
  pid_t now = getpid();
  if (now == pid_) return;
  throw ForkedChildError(std::string(object) + " created by pid " + std::to_string(pid_) +
                         ", used from pid " + std::to_string(now) +
                         " (a forked child cannot use its parent's RDMA resources; create them "
                         "in the child, or fork before initializing RDMA)");
}

}  // namespace forkguard::rdma
