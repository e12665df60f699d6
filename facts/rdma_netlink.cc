#include "facts/rdma_netlink.h"

#include <errno.h>
#include <linux/netlink.h>
#include <rdma/rdma_netlink.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <cstring>

namespace forkguard::facts {

int OpenRdmaNetlink(int timeout_s) {
  int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_RDMA);
  if (fd < 0) return -1;
  timeval tv{timeout_s, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

int SendRdmaNetlinkRequest(int fd, int cmd, uint16_t flags, uint32_t seq, int dev) {
  struct {
    nlmsghdr hdr;
    char attrs[16];
  } req{};
  req.hdr.nlmsg_len = NLMSG_LENGTH(0);
  req.hdr.nlmsg_type = RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, cmd);
  req.hdr.nlmsg_flags = NLM_F_REQUEST | flags;
  req.hdr.nlmsg_seq = seq;
  if (dev >= 0) {
    auto* a = reinterpret_cast<nlattr*>(req.attrs);
    a->nla_type = RDMA_NLDEV_ATTR_DEV_INDEX;
    a->nla_len = NLA_HDRLEN + 4;
    uint32_t v = static_cast<uint32_t>(dev);
    memcpy(req.attrs + NLA_HDRLEN, &v, 4);
    req.hdr.nlmsg_len += NLA_ALIGN(a->nla_len);
  }
  sockaddr_nl addr{};
  addr.nl_family = AF_NETLINK;
  if (sendto(fd, &req, req.hdr.nlmsg_len, 0, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) <
      0) {
    return errno;
  }
  return 0;
}

}  // namespace forkguard::facts
