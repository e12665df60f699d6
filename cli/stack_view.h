// How a stack reads to a person. For a Python process the Python frames come
// first, headed by the innermost frame outside the standard library and
// site-packages (the user's line: `train.py:88 in build_loader`); the library
// the call went through (pyverbs, torch.distributed, mpi4py, multiprocessing)
// is named on one line, and the interpreter's native frames are folded.
// Used by every renderer (text, Markdown, HTML).
#pragma once

#include <string>
#include <vector>

#include "cli/event_log.h"

namespace forkguard::cli {

struct StackView {
  bool python = false;      // the stack has Python frames
  std::vector<int> py;      // indexes of the Python frames, innermost first
  int head = -1;            // index into the Stack of the frame that names the site
  std::vector<int> inside;  // Python library frames inside the head call, innermost first
  std::vector<std::string> libraries;  // libraries the call went through, outer to inner
  int native_frames = 0;               // native frames (folded for Python stacks)
};

StackView ViewStack(const Stack& s);

// A Python file of the standard library or an installed package (site-packages,
// dist-packages, frozen importlib): not the user's code.
bool IsLibraryPythonFile(const std::string& file);

// "multiprocessing/popen_fork.py" for /usr/lib/python3.11/multiprocessing/popen_fork.py,
// "torch/utils/data/dataloader.py" for .../dist-packages/torch/..., the base name
// for the user's files.
std::string ShortPythonPath(const std::string& file);

// The library a frame belongs to: "multiprocessing", "torch.distributed", "pyverbs",
// "mpi4py", "libmpi", or "" for the user's code, the interpreter and plumbing
// (libforkguard, libc, libibverbs, librdmacm).
std::string LibraryOf(const Frame& f);

// True for frames a person never wants to see first: forkguard, libc, libibverbs, ...
bool IsPlumbingFrame(const Frame& f);

// "rdma_common.py:20 in open_rdma", "loader.cc:298", a function name, or "".
std::string SiteHeading(const Stack& s);

// One line per frame to show, indented, cut to `width` columns (width 0: no cut).
// Python stacks: the Python frames from the head outwards, one "inside:" line
// for the library frames and the library the call entered, then either a fold
// line or (show_native) the native frames. Other stacks: the native frames.
std::vector<std::string> StackLines(const Stack& s, bool show_native, size_t max_frames = 12);

// One frame as a debugger prints it: "main at train.py:42" / "f at x.cc:3" / "f (lib.so+0x1)".
std::string FrameText(const Frame& f);

}  // namespace forkguard::cli
