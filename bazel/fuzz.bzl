"""forkguard_fuzzer: a libFuzzer binary, built with clang (ASan + UBSan + libFuzzer).

libFuzzer needs clang and the project's C++ toolchain is gcc, so this rule compiles and links
its sources with clang++ in one action, with the project's flags (copts.bzl) and the fuzzing
ones below. `srcs` are the fuzzer's own sources, `deps` the cc_library targets of the code
under test: their sources, headers (generated ones too: the output tree is on the include
path) and linkopts, and those of their deps, are compiled in (collected by an aspect), so a
library's sources are listed once, in its own target. `hdrs` and `linkopts` add headers and
system libraries of the fuzzer's own. The result is executable:
forkguard_fuzz_test runs it for a while over its corpus (tests/support/run_fuzzer.sh, tag
"fuzz"), forkguard_corpus_test runs it once on each file of its corpus (run_corpus.sh: the
regression test of what fuzzing found), scripts/fuzz runs every fuzzer longer."""

load(":copts.bzl", "FORKGUARD_COPTS")

_FUZZ_FLAGS = [
    "-O1",
    "-fsanitize=fuzzer,address,undefined",
    "-fno-sanitize-recover=undefined",
]

# What a cc_library and its deps compile: sources, headers, linkopts.
_CcSourcesInfo = provider(fields = ["srcs", "hdrs", "linkopts"])

def _cc_sources_aspect_impl(target, ctx):
    rule = ctx.rule
    deps = [d[_CcSourcesInfo] for d in getattr(rule.attr, "deps", []) if _CcSourcesInfo in d]
    files = getattr(rule.files, "srcs", [])
    return [_CcSourcesInfo(
        srcs = depset(
            [f for f in files if f.extension in ["c", "cc"]],
            transitive = [d.srcs for d in deps],
        ),
        hdrs = depset(
            [f for f in files if f.extension not in ["c", "cc"]] +
            getattr(rule.files, "hdrs", []) + getattr(rule.files, "textual_hdrs", []),
            transitive = [d.hdrs for d in deps],
        ),
        linkopts = depset(getattr(rule.attr, "linkopts", []), transitive = [d.linkopts for d in deps]),
    )]

_cc_sources_aspect = aspect(
    implementation = _cc_sources_aspect_impl,
    attr_aspects = ["deps"],
)

def _forkguard_fuzzer_impl(ctx):
    out = ctx.actions.declare_file(ctx.label.name)
    deps = [d[_CcSourcesInfo] for d in ctx.attr.deps]
    srcs = depset(ctx.files.srcs, transitive = [d.srcs for d in deps]).to_list()
    hdrs = depset(ctx.files.hdrs, transitive = [d.hdrs for d in deps]).to_list()
    linkopts = depset(ctx.attr.linkopts, transitive = [d.linkopts for d in deps]).to_list()
    sources = [f for f in srcs if f.extension in ["c", "cc"]]
    args = ctx.actions.args()
    args.add_all(FORKGUARD_COPTS + _FUZZ_FLAGS)
    args.add("-I.")
    args.add("-I" + ctx.bin_dir.path)
    args.add_all(sources)
    args.add_all(linkopts)
    args.add("-o", out)
    ctx.actions.run_shell(
        inputs = srcs + hdrs,
        outputs = [out],
        command = "exec clang++ \"$@\"",
        arguments = [args],
        mnemonic = "ClangFuzzer",
        progress_message = "Building libFuzzer binary %s with clang" % ctx.label,
        use_default_shell_env = True,
    )
    return [DefaultInfo(executable = out, files = depset([out]))]

forkguard_fuzzer = rule(
    implementation = _forkguard_fuzzer_impl,
    attrs = {
        "srcs": attr.label_list(allow_files = [".c", ".cc"], mandatory = True),
        "deps": attr.label_list(aspects = [_cc_sources_aspect]),
        "hdrs": attr.label_list(allow_files = True),
        "linkopts": attr.string_list(),
    },
    executable = True,
)

def forkguard_fuzz_test(name, fuzzer, seed, seconds, corpus, dict = None, flags = []):
    """Runs `fuzzer` for `seconds` over `corpus` (files, `seed` one of them): medium, tag "fuzz".

    `dict`: a libFuzzer dictionary file (-dict=); `flags`: more libFuzzer flags."""
    native.sh_test(
        name = name,
        size = "medium",
        srcs = ["//tests/support:run_fuzzer.sh"],
        args = [
            "$(location %s)" % fuzzer,
            "$(location %s)" % seed,
            str(seconds),
        ] + (["-dict=$(location %s)" % dict] if dict else []) + flags,
        data = [fuzzer] + corpus + ([dict] if dict else []),
        tags = ["fuzz"],
    )

def forkguard_corpus_test(name, fuzzer, corpus):
    """Runs `fuzzer` once on each file of `corpus` (no fuzzing): a cheap regression test."""
    native.sh_test(
        name = name,
        size = "small",
        srcs = ["//tests/support:run_corpus.sh"],
        args = ["$(location %s)" % fuzzer] + ["$(location %s)" % f for f in corpus],
        data = [fuzzer] + corpus,
    )
