#include "api/rdma_resources.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <rdma/rdma_netlink.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iterator>

#include "facts/rdma_netlink.h"
#include "names/name_table.h"

namespace forkguard::api {
namespace {

struct KindSpec {
  ResourceKind kind;
  int cmd;
  int table;
  int entry;
};

// The dump command, table attribute and entry attribute of the kernel's NAME objects.
#define FORKGUARD_KIND(kind, NAME)                                                   \
  {                                                                                  \
    ResourceKind::kind, RDMA_NLDEV_CMD_RES_##NAME##_GET, RDMA_NLDEV_ATTR_RES_##NAME, \
        RDMA_NLDEV_ATTR_RES_##NAME##_ENTRY                                           \
  }
constexpr KindSpec kKinds[] = {
    FORKGUARD_KIND(kContext, CTX), FORKGUARD_KIND(kPd, PD), FORKGUARD_KIND(kMr, MR),
    FORKGUARD_KIND(kCq, CQ),       FORKGUARD_KIND(kQp, QP), FORKGUARD_KIND(kCmId, CM_ID),
};
#undef FORKGUARD_KIND

// Walks the attributes in [p, p + len), calling f(type, payload, payload_len).
void ForEachAttr(const char* p, int len, const std::function<void(int, const char*, int)>& f) {
  while (len >= static_cast<int>(NLA_HDRLEN)) {
    const auto* a = reinterpret_cast<const nlattr*>(p);
    if (a->nla_len < NLA_HDRLEN || a->nla_len > len) return;
    f(a->nla_type & NLA_TYPE_MASK, p + NLA_HDRLEN, a->nla_len - NLA_HDRLEN);
    int step = NLA_ALIGN(a->nla_len);
    p += step;
    len -= step;
  }
}

uint32_t U32(const char* p, int n) {
  uint32_t v = 0;
  if (n >= 4) memcpy(&v, p, 4);
  return v;
}
uint64_t U64(const char* p, int n) {
  uint64_t v = 0;
  if (n >= 8) memcpy(&v, p, 8);
  return v;
}
std::string Str(const char* p, int n) { return std::string(p, strnlen(p, static_cast<size_t>(n))); }

class NetlinkSocket {
 public:
  NetlinkSocket() : fd_(facts::OpenRdmaNetlink(2)) {}
  ~NetlinkSocket() {
    if (fd_ >= 0) close(fd_);
  }
  bool ok() const { return fd_ >= 0; }

  // Sends one dump request (with a device index attribute when dev >= 0) and calls
  // on_msg(payload, len) for every reply message. Returns 0 or a positive errno.
  int Dump(int cmd, int dev, const std::function<void(const char*, int)>& on_msg) {
    if (int err = facts::SendRdmaNetlinkRequest(fd_, cmd, NLM_F_DUMP, ++seq_, dev)) return err;
    std::vector<char> buf(64 * 1024);
    for (;;) {
      ssize_t n = recv(fd_, buf.data(), buf.size(), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return n < 0 ? errno : EIO;
      int len = static_cast<int>(n);
      for (auto* h = reinterpret_cast<nlmsghdr*>(buf.data()); NLMSG_OK(h, len);
           h = NLMSG_NEXT(h, len)) {
        if (h->nlmsg_seq != seq_) continue;
        if (h->nlmsg_type == NLMSG_DONE) return 0;
        if (h->nlmsg_type == NLMSG_ERROR) {
          const auto* e = static_cast<const nlmsgerr*>(NLMSG_DATA(h));
          return e->error == 0 ? 0 : -e->error;
        }
        on_msg(static_cast<const char*>(NLMSG_DATA(h)),
               static_cast<int>(h->nlmsg_len - NLMSG_LENGTH(0)));
      }
    }
  }

 private:
  int fd_ = -1;
  uint32_t seq_ = 0;
};

}  // namespace

const char* ResourceKindName(ResourceKind k) {
  static constexpr char kNames[][6] = {"ctx", "pd", "mr", "cq", "qp", "cm_id"};
  static_assert(std::size(kNames) == CountThrough(ResourceKind::kCmId));
  return NameOf(kNames, k, "?");
}

void ResourceCounts::Add(const RdmaResource& r) {
  // The count of each kind, in ResourceKind's order.
  static constexpr int ResourceCounts::*kCountOf[] = {
      &ResourceCounts::contexts, &ResourceCounts::pds, &ResourceCounts::mrs,
      &ResourceCounts::cqs,      &ResourceCounts::qps, &ResourceCounts::cm_ids,
  };
  static_assert(std::size(kCountOf) == CountThrough(ResourceKind::kCmId));
  auto i = static_cast<size_t>(r.kind);
  if (i < std::size(kCountOf)) ++(this->*kCountOf[i]);
  if (r.kind == ResourceKind::kMr) mr_bytes += r.mr_len;
}

ResourceDump DumpRdmaResources() {
  ResourceDump out;
  NetlinkSocket nl;
  if (!nl.ok()) {
    out.error = std::string("no RDMA netlink: ") + strerror(errno);
    return out;
  }
  std::vector<std::pair<int, std::string>> devs;
  int err = nl.Dump(RDMA_NLDEV_CMD_GET, -1, [&](const char* p, int len) {
    int index = -1;
    std::string name;
    ForEachAttr(p, len, [&](int type, const char* v, int n) {
      if (type == RDMA_NLDEV_ATTR_DEV_INDEX) index = static_cast<int>(U32(v, n));
      if (type == RDMA_NLDEV_ATTR_DEV_NAME) name = Str(v, n);
    });
    if (index >= 0) devs.emplace_back(index, name);
  });
  if (err != 0) {
    out.error = std::string("RDMA netlink device dump failed: ") + strerror(err);
    return out;
  }
  for (const auto& [index, name] : devs) {
    out.devices.push_back(name);
    for (const KindSpec& k : kKinds) {
      err = nl.Dump(k.cmd, index, [&](const char* p, int len) {
        ForEachAttr(p, len, [&](int type, const char* v, int n) {
          if (type != k.table) return;
          ForEachAttr(v, n, [&](int etype, const char* ev, int en) {
            if (etype != k.entry) return;
            RdmaResource r;
            r.kind = k.kind;
            r.device = name;
            ForEachAttr(ev, en, [&](int at, const char* av, int an) {
              if (at == RDMA_NLDEV_ATTR_RES_PID) r.tid = static_cast<pid_t>(U32(av, an));
              if (at == RDMA_NLDEV_ATTR_RES_KERN_NAME) {
                r.kernel = true;
                r.kern_name = Str(av, an);
              }
              if (at == RDMA_NLDEV_ATTR_RES_MRLEN) r.mr_len = U64(av, an);
              if (at == RDMA_NLDEV_ATTR_RES_IOVA) {
                r.iova = U64(av, an);
                r.has_iova = true;
              }
            });
            out.resources.push_back(std::move(r));
          });
        });
      });
      if (err == EINVAL || err == EOPNOTSUPP) {
        std::string kind = ResourceKindName(k.kind);
        bool seen = false;
        for (const std::string& u : out.unsupported) seen = seen || u == kind;
        if (!seen) out.unsupported.push_back(kind);
      } else if (err != 0) {
        out.error = std::string("RDMA netlink ") + ResourceKindName(k.kind) + " dump of " + name +
                    " failed: " + strerror(err);
        return out;
      }
    }
  }
  return out;
}

pid_t ThreadGroup(pid_t tid) {
  if (tid <= 0) return 0;
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/status", static_cast<int>(tid));
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[4096];
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  const char* p = strstr(buf, "\nTgid:");
  if (p == nullptr) return 0;
  return static_cast<pid_t>(strtol(p + 6, nullptr, 10));
}

}  // namespace forkguard::api
