#include "rdma/open_device.h"

#include <string.h>

namespace forkguard::rdma {

OpenedDevice OpenDeviceAndPd(const char* name, void (*die)(const char* what)) {
  OpenedDevice r;
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr) {
    die("ibv_get_device_list");
    return r;
  }
  for (int i = 0; i < n && r.ctx == nullptr; ++i) {
    if (name == nullptr || strcmp(name, ibv_get_device_name(list[i])) == 0) {
      r.ctx = ibv_open_device(list[i]);
    }
  }
  ibv_free_device_list(list);
  if (r.ctx == nullptr) {
    die("ibv_open_device (no such device?)");
    return r;
  }
  r.pd = ibv_alloc_pd(r.ctx);
  if (r.pd == nullptr) die("ibv_alloc_pd");
  return r;
}

}  // namespace forkguard::rdma
