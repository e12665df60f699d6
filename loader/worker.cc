// The worker side of the loader. Everything here runs in a forked child.
#include "loader/worker.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <exception>

namespace forkguard::loader::internal {

void BuildBatch(const Dataset& dataset, const Transform& transform, const SlotHeader& header,
                std::byte* out, size_t sample_bytes, WorkerStatus* status) {
  for (uint64_t k = 0; k < header.count; k++) {
    uint64_t idx = header.samples[k];
    status->sample.store(static_cast<int64_t>(idx), std::memory_order_relaxed);
    transform(dataset.Get(idx), std::span<std::byte>(out + k * sample_bytes, sample_bytes));
    status->progress.fetch_add(1, std::memory_order_relaxed);
  }
  status->sample.store(-1, std::memory_order_relaxed);
}

namespace {

void SendResult(int sock, const ResultMsg& r) {
  while (send(sock, &r, sizeof r, MSG_NOSIGNAL) < 0 && errno == EINTR) {
  }
}

}  // namespace

[[noreturn]] void WorkerMain(const WorkerSetup& s) {
  // Die with the parent: a worker must never outlive the loader.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != s.parent) _exit(0);
  for (size_t i = 0; i < s.n_close_fds; i++) close(s.close_fds[i]);
  // The parent handles SIGINT (e.g. Ctrl-C on the terminal's process group).
  signal(SIGINT, SIG_IGN);

  for (;;) {
    TaskMsg t;
    ssize_t n = recv(s.sock, &t, sizeof t, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n != static_cast<ssize_t>(sizeof t)) _exit(0);  // parent closed (shutdown) or died
    const auto* header =
        reinterpret_cast<const SlotHeader*>(s.control_base + t.slot * s.header_stride);
    ResultMsg r{};
    r.seq = t.seq;
    r.slot = t.slot;
    r.ok = 1;
    try {
      BuildBatch(*s.dataset, *s.transform, *header, s.data_base + t.slot * s.slot_stride,
                 s.sample_bytes, s.status);
    } catch (const std::exception& e) {
      r.ok = 0;
      r.sample = s.status->sample.load();
      snprintf(r.message, sizeof r.message, "%s", e.what());
    } catch (...) {
      r.ok = 0;
      r.sample = s.status->sample.load();
      snprintf(r.message, sizeof r.message, "unknown exception");
    }
    SendResult(s.sock, r);
    if (!r.ok) _exit(1);
  }
}

}  // namespace forkguard::loader::internal
