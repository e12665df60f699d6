"""forkguard_cc_library, forkguard_cc_binary, forkguard_cc_test: Bazel's C/C++ rules with what
every forkguard target shares, so that a BUILD file says only what is particular to a target.

- copts: the project's flags (copts.bzl) come first; a target's own `copts` are appended.
  A target whose source files are all C (`.c`, `.h`) gets FORKGUARD_C_COPTS (no -std=c++20).
- Sources by name: forkguard_cc_library with neither `srcs` nor `hdrs` is name + ".cc" and
  name + ".h"; forkguard_cc_binary's and forkguard_cc_test's `srcs` default to [name + ".cc"].
  `folder`: the library's or test's files (by name or as listed) are in that folder of the
  package (a package in folders, like //shim: one folder a layer).
- forkguard_cc_test: GoogleTest's main is a dependency unless the target names a GoogleTest
  library itself or says `gtest_main = False`.
  `rdma = True`: a real-device test (tag "rdma": scripts/lanes/rdma-lane runs it in the Soft-RoCE
  guest) with //tests/support:rdma_device, whose RequireRdmaDevice() it calls first.
- forkguard_sh_test: sh_test whose script is name + ".sh" unless `srcs` says otherwise.

forkguard_table(rule, rows, **shared): one target of `rule` per row, for the targets of a
package that share a shape (the same rule, deps, data, tags), so that the shared part is
written once and each row says only what is its own:

    forkguard_table(
        forkguard_cc_test,
        deps = ["//tests/support:runfiles"],          # every row's
        rows = {
            "a_test": dict(data = [":a"]),
            "b_test": dict(deps = [":b"], size = "small"),
        },
    )

A row's list attribute (deps, data, tags, srcs, copts, local_defines, linkopts, args, ...)
comes after the shared one of the same name; a row's other attributes (size, rdma, linkstatic,
...) replace the shared value. Each target keeps its rule's defaults.

The flags are on the targets, not only in the project's .bazelrc, so that a workspace that
adds forkguard as an external repository (docs/bazel.md) builds it the same way."""

load("@rules_cc//cc:defs.bzl", "cc_binary", "cc_library", "cc_test")
load(":copts.bzl", "FORKGUARD_COPTS", "FORKGUARD_C_COPTS")

def _copts(srcs, copts):
    """The project's flags for these sources, then the target's own. Other targets named in
    srcs (":stub.so") say nothing about the language."""
    files = [s for s in srcs if not s.startswith(":") and not s.startswith("/")]
    if any([f.endswith(".c") for f in files]) and all([f.endswith((".c", ".h")) for f in files]):
        return FORKGUARD_C_COPTS + copts
    return FORKGUARD_COPTS + copts

def _in_folder(folder, files):
    """`files` (a list, or None) in `folder` of the package; targets (":x") as they are."""
    if not folder or files == None:
        return files
    return [f if f.startswith(":") else folder + "/" + f for f in files]

def forkguard_cc_library(name, srcs = None, hdrs = None, copts = [], folder = "", **kwargs):
    if srcs == None and hdrs == None:
        srcs = [name + ".cc"]
        hdrs = [name + ".h"]
    srcs = _in_folder(folder, srcs)
    hdrs = _in_folder(folder, hdrs)
    if hdrs != None:
        kwargs["hdrs"] = hdrs
    srcs = srcs or []
    cc_library(name = name, srcs = srcs, copts = _copts(srcs, copts), **kwargs)

def forkguard_cc_binary(name, srcs = None, copts = [], **kwargs):
    if srcs == None:
        srcs = [name + ".cc"]
    cc_binary(name = name, srcs = srcs, copts = _copts(srcs, copts), **kwargs)

def forkguard_cc_test(name, srcs = None, copts = [], deps = [], gtest_main = True, rdma = False, tags = [], folder = "", **kwargs):
    if srcs == None:
        srcs = [name + ".cc"]
    srcs = _in_folder(folder, srcs)
    if rdma:
        tags = tags + ["rdma"]
        deps = deps + ["//tests/support:rdma_device"]
    names_gtest = [d for d in deps if type(d) == "string" and d.startswith("@googletest//")]
    if gtest_main and not names_gtest:
        deps = deps + ["@googletest//:gtest_main"]
    cc_test(name = name, srcs = srcs, copts = _copts(srcs, copts), deps = deps, tags = tags, **kwargs)

def _row_attrs(shared, own):
    attrs = dict(shared)
    for key, value in own.items():
        if type(value) == "list" and type(attrs.get(key)) == "list":
            attrs[key] = attrs[key] + value
        else:
            attrs[key] = value
    return attrs

def forkguard_table(rule, rows, **shared):
    for name, own in rows.items():
        rule(name = name, **_row_attrs(shared, own))

def forkguard_sh_test(name, srcs = None, **kwargs):
    """sh_test whose script is name + ".sh" unless srcs says otherwise."""
    native.sh_test(name = name, srcs = srcs if srcs != None else [name + ".sh"], **kwargs)
