#include "tests/support/rdma_device.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>

#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace forkguard::test_support {
namespace {

std::string Env(const char* name) {
  const char* v = getenv(name);
  return v ? v : "";
}

bool PortActive(const std::string& dev) {
  std::ifstream f("/sys/class/infiniband/" + dev + "/ports/1/state");
  std::string s;
  std::getline(f, s);
  return s.find("ACTIVE") != std::string::npos;
}

}  // namespace

RdmaDevice RequireRdmaDevice() {
  RdmaDevice d;
  d.name = Env("RXE_DEV");
  d.ip = Env("RXE_IP");
  d.gid_index = Env("RXE_GID_INDEX").empty() ? 1 : atoi(Env("RXE_GID_INDEX").c_str());
  if (d.name.empty()) {
    if (DIR* dir = opendir("/sys/class/infiniband")) {
      while (dirent* e = readdir(dir)) {
        if (e->d_name[0] != '.' && PortActive(e->d_name)) {
          d.name = e->d_name;
          break;
        }
      }
      closedir(dir);
    }
  }
  if (d.name.empty() || !PortActive(d.name)) {
    ADD_FAILURE() << "\n*** NO RDMA DEVICE ***\nThis test needs a real RDMA device with an "
                     "ACTIVE port and found none.\nRun it through scripts/lanes/rdma-lane (boots "
                     "the Soft-RoCE guest) instead of on the bare host.\n";
    throw std::runtime_error("no RDMA device");
  }
  return d;
}

bool RdmaPair(RdmaDevice* a, RdmaDevice* b) {
  if (Env("RXE_PAIR_A_DEV").empty()) return false;
  *a = {Env("RXE_PAIR_A_DEV"), Env("RXE_PAIR_A_IP"), 1};
  *b = {Env("RXE_PAIR_B_DEV"), Env("RXE_PAIR_B_IP"), 1};
  return true;
}

}  // namespace forkguard::test_support
