// Errors of the RDMA transport, and the guard that keeps a forked child away
// from its parent's RDMA resources.
#pragma once

#include <sys/types.h>

#include <stdexcept>
#include <string>

namespace forkguard::rdma {

// Every failure of a verbs/rdmacm call, of the peer or of the link. what() names
// the call (or the CM/completion event) and, where there is one, errno.
class TransportError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A transport object used from a process other than the one that created it.
// A forked child shares the parent's device file descriptors but not its
// kernel-side ownership: its verbs calls fail or, worse, act on the parent's
// QPs. So every object refuses such use up front.
class ForkedChildError : public TransportError {
 public:
  using TransportError::TransportError;
};

// Throws TransportError("<call>: <strerror(err)> (errno <err>)<detail>").
[[noreturn]] void ThrowCallError(const char* call, int err, const std::string& detail = "");

// Remembers the pid that created an object. Check() throws ForkedChildError
// when called from any other pid. InCreator() lets destructors skip releasing
// handles in a child (the kernel objects belong to the parent).
class CreatorPid {
 public:
  CreatorPid();
  void Check(const char* object) const;
  bool InCreator() const;
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_;
};

}  // namespace forkguard::rdma
