#include "cli/stack_view.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "cli/format.h"

namespace forkguard::cli {
namespace {

bool StartsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// Where an installed package's path starts: just after "site-packages/" or
// "dist-packages/", std::string::npos when the file is not in one.
size_t PackageStart(const std::string& file) {
  for (const char* dir : {"/site-packages/", "/dist-packages/"}) {
    size_t p = file.rfind(dir);
    if (p != std::string::npos) return p + std::char_traits<char>::length(dir);
  }
  return std::string::npos;
}

// Just after ".../lib/python3.X/" (the standard library), or npos.
size_t StdlibStart(const std::string& file) {
  size_t p = file.find("/lib/python3");
  if (p == std::string::npos) return std::string::npos;
  size_t slash = file.find('/', p + 5);
  return slash == std::string::npos ? std::string::npos : slash + 1;
}

// The interpreter itself: its executable and libpython.
bool IsInterpreterObject(const std::string& obj) {
  std::string b = Basename(obj);
  return StartsWith(b, "python3") || StartsWith(b, "libpython");
}

// "torch/distributed/distributed_c10d.py" -> "torch.distributed";
// "multiprocessing/popen_fork.py" -> "multiprocessing"; "os.py" -> "os".
std::string ModuleOfPath(const std::string& rel) {
  std::vector<std::string> parts;
  size_t pos = 0;
  while (pos <= rel.size()) {
    size_t s = rel.find('/', pos);
    parts.push_back(rel.substr(pos, s == std::string::npos ? std::string::npos : s - pos));
    if (s == std::string::npos) break;
    pos = s + 1;
  }
  if (parts.empty()) return rel;
  if (parts.size() == 1) {
    std::string m = parts[0];
    size_t dot = m.find('.');
    return dot == std::string::npos ? m : m.substr(0, dot);
  }
  // A package and its first sub-package name it best (torch.distributed, torch.utils).
  std::string m = parts[0];
  if (parts.size() > 2) m += "." + parts[1];
  return m;
}

std::string PythonFrameText(const Frame& f) {
  return f.py_func + " at " + ShortPythonPath(f.py_file) + ":" + std::to_string(f.py_line);
}

}  // namespace

bool IsLibraryPythonFile(const std::string& file) {
  if (file.empty() || file[0] == '<') return true;  // <frozen importlib._bootstrap>, <string>
  return PackageStart(file) != std::string::npos || StdlibStart(file) != std::string::npos;
}

std::string ShortPythonPath(const std::string& file) {
  if (size_t p = PackageStart(file); p != std::string::npos) return file.substr(p);
  if (size_t p = StdlibStart(file); p != std::string::npos) return file.substr(p);
  if (!file.empty() && file[0] == '<') return file;
  return Basename(file);
}

bool IsPlumbingFrame(const Frame& f) {
  if (f.python) return false;
  std::string obj = Basename(f.obj);
  const std::string& name = f.func.empty() ? f.sym : f.func;
  if (StartsWith(obj, "libforkguard") || StartsWith(obj, "libc.so") ||
      StartsWith(obj, "libibverbs") || StartsWith(obj, "librdmacm") ||
      StartsWith(obj, "libpthread") || StartsWith(obj, "ld-linux"))
    return true;
  return name == "fork" || name == "__libc_fork" || name == "_Fork" || name == "__fork";
}

std::string LibraryOf(const Frame& f) {
  if (f.python) {
    if (!IsLibraryPythonFile(f.py_file)) return "";
    if (!f.py_file.empty() && f.py_file[0] == '<') return "importlib";
    return ModuleOfPath(ShortPythonPath(f.py_file));
  }
  if (f.obj.empty() || IsPlumbingFrame(f) || IsInterpreterObject(f.obj)) return "";
  // A native extension of an installed package: .../dist-packages/pyverbs/device.cpython-311...so
  if (size_t p = PackageStart(f.obj); p != std::string::npos) {
    std::string rel = f.obj.substr(p);
    size_t s = rel.find('/');
    std::string top = s == std::string::npos ? rel : rel.substr(0, s);
    size_t dot = top.find('.');
    return dot == std::string::npos ? top : top.substr(0, dot);
  }
  // A standard-library extension (lib-dynload/_posixsubprocess...so).
  if (f.obj.find("/lib-dynload/") != std::string::npos) return "";
  // A shared library: "libmpi.so.40.30.4" -> "libmpi". The main executable is the user's.
  std::string b = Basename(f.obj);
  size_t so = b.find(".so");
  if (so == std::string::npos) return "";
  return b.substr(0, so);
}

StackView ViewStack(const Stack& s) {
  StackView v;
  for (int i = 0; i < static_cast<int>(s.size()); ++i) {
    if (s[i].python)
      v.py.push_back(i);
    else
      ++v.native_frames;
  }
  v.python = !v.py.empty();
  if (v.python) {
    for (int i : v.py) {
      if (!IsLibraryPythonFile(s[i].py_file)) {
        v.head = i;
        break;
      }
      v.inside.push_back(i);
    }
    if (v.head < 0) {  // only library frames: the outermost names the site
      v.head = v.py.back();
      v.inside.pop_back();
    }
  } else {
    for (int i = 0; i < static_cast<int>(s.size()); ++i) {
      if (!IsPlumbingFrame(s[i])) {
        v.head = i;
        break;
      }
    }
  }
  // Libraries the head call went through, outer to inner: Python library frames
  // inside the head call, then native library frames (outermost first).
  auto add = [&](const std::string& lib) {
    // The import machinery is how, not where: `from mpi4py import MPI` is mpi4py.
    if (lib == "importlib") return;
    if (!lib.empty() && std::find(v.libraries.begin(), v.libraries.end(), lib) == v.libraries.end())
      v.libraries.push_back(lib);
  };
  if (v.python) {
    for (auto it = v.inside.rbegin(); it != v.inside.rend(); ++it) add(LibraryOf(s[*it]));
    for (int i = static_cast<int>(s.size()) - 1; i >= 0; --i)
      if (!s[i].python) add(LibraryOf(s[i]));
  }
  return v;
}

std::string SiteHeading(const Stack& s) {
  StackView v = ViewStack(s);
  if (v.python) {
    const Frame& f = s[v.head];
    return ShortPythonPath(f.py_file) + ":" + std::to_string(f.py_line) + " in " + f.py_func;
  }
  for (const auto& f : s) {
    if (IsPlumbingFrame(f)) continue;
    if (!f.src_file.empty()) return Basename(f.src_file) + ":" + std::to_string(f.src_line);
    if (!f.func.empty()) return f.func;
    if (!f.sym.empty()) return f.sym;
    if (!f.obj.empty() && f.off) return Basename(f.obj) + "+" + Hex(*f.off);
  }
  return "";
}

std::string FrameText(const Frame& f) {
  if (f.python) return PythonFrameText(f) + " (Python)";
  std::string name = !f.func.empty() ? f.func : !f.sym.empty() ? f.sym : "??";
  // Like a debugger: file:line when known, else the object and offset.
  if (!f.src_file.empty()) return name + " at " + f.src_file + ":" + std::to_string(f.src_line);
  if (!f.obj.empty() && f.off) return name + " (" + Basename(f.obj) + "+" + Hex(*f.off) + ")";
  if (!f.obj.empty()) return name + " (" + Basename(f.obj) + ")";
  return f.ip ? name + " " + Hex(f.ip) : name;
}

std::vector<std::string> StackLines(const Stack& s, bool show_native, size_t max_frames) {
  std::vector<std::string> out;
  if (s.empty()) {
    out.push_back("(no stack in the log)");
    return out;
  }
  StackView v = ViewStack(s);
  if (!v.python) {
    for (size_t i = 0; i < s.size() && i < max_frames; ++i)
      out.push_back("#" + std::to_string(i) + " " + FrameText(s[i]));
    if (s.size() > max_frames)
      out.push_back("… " + std::to_string(s.size() - max_frames) + " more frames");
    return out;
  }
  // The user's frames from the head outwards (Python numbering: #0 is the head).
  size_t n = 0, first = 0;
  while (v.py[first] != v.head) ++first;
  for (size_t k = first; k < v.py.size(); ++k, ++n) {
    if (n == max_frames) {
      out.push_back("… " + std::to_string(v.py.size() - k) + " more Python frames");
      break;
    }
    const Frame& f = s[v.py[k]];
    std::string lib = LibraryOf(f);
    out.push_back("#" + std::to_string(n) + " " + PythonFrameText(f) +
                  (lib.empty() ? "" : " [" + lib + "]"));
  }
  if (!v.libraries.empty() || !v.inside.empty()) {
    std::string chain;
    for (const auto& l : v.libraries) chain += (chain.empty() ? "" : " → ") + l;
    std::string line = "inside: " + (chain.empty() ? std::string("the standard library") : chain);
    if (!v.inside.empty()) {
      const Frame& in = s[v.inside[0]];
      line += " (" + std::to_string(v.inside.size()) + " frame" + (v.inside.size() == 1 ? "" : "s");
      if (!in.py_file.empty() && in.py_file[0] != '<')
        line += ", innermost " + Basename(in.py_file) + ":" + std::to_string(in.py_line) + " in " +
                in.py_func;
      line += ")";
    }
    out.push_back(line);
  }
  if (v.native_frames == 0) return out;
  if (!show_native) {
    out.push_back("(" + std::to_string(v.native_frames) + " native frame" +
                  (v.native_frames == 1 ? "" : "s") + " folded: --native shows them)");
    return out;
  }
  out.push_back("native frames:");
  size_t shown = 0, k = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i].python) continue;
    if (shown == max_frames * 2) {
      out.push_back("  … " + std::to_string(v.native_frames - shown) + " more native frames");
      break;
    }
    out.push_back("  #" + std::to_string(k++) + " " + FrameText(s[i]));
    ++shown;
  }
  return out;
}

}  // namespace forkguard::cli
