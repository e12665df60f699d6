// `forkguard report` (--format text): a compiler-style diagnostic per hazardous call site that
// fits the terminal's width (100 columns by default), then the clean sites, the RDMA init
// sites, the children that died, the process tree and the notes.
#pragma once

#include <string>

#include "cli/job_report.h"

namespace forkguard::cli {

// show_native: for Python processes, also the interpreter's native frames (folded by
// default: the Python stack is what the user wrote).
std::string RenderText(const JobReport& r, int width = 100, bool show_native = false);

}  // namespace forkguard::cli
