"""forkguard_fuzzer: a libFuzzer binary, built with clang (ASan + UBSan + libFuzzer).

libFuzzer needs clang and the project's C++ toolchain is gcc, so this rule compiles and links
its sources with clang++ in one action, with the project's flags (copts.bzl) and the fuzzing
ones below. `srcs` are the sources compiled into the fuzzer (the target's own and those of
the code under test), `hdrs` what they include (generated headers too: the output tree is on
the include path), `linkopts` the system libraries they need. The result is executable:
forkguard_fuzz_test runs it for a while over its corpus (tests/support/run_fuzzer.sh, tag
"fuzz"), scripts/fuzz runs it longer."""

load(":copts.bzl", "FORKGUARD_COPTS")

_FUZZ_FLAGS = [
    "-O1",
    "-fsanitize=fuzzer,address,undefined",
    "-fno-sanitize-recover=undefined",
]

def _forkguard_fuzzer_impl(ctx):
    out = ctx.actions.declare_file(ctx.label.name)
    sources = [f for f in ctx.files.srcs if f.extension in ["c", "cc"]]
    args = ctx.actions.args()
    args.add_all(FORKGUARD_COPTS + _FUZZ_FLAGS)
    args.add("-I.")
    args.add("-I" + ctx.bin_dir.path)
    args.add_all(sources)
    args.add_all(ctx.attr.linkopts)
    args.add("-o", out)
    ctx.actions.run_shell(
        inputs = ctx.files.srcs + ctx.files.hdrs,
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
        "hdrs": attr.label_list(allow_files = True),
        "linkopts": attr.string_list(),
    },
    executable = True,
)

def forkguard_fuzz_test(name, fuzzer, seed, seconds, corpus):
    """Runs `fuzzer` for `seconds` over `corpus` (files, `seed` one of them): medium, tag "fuzz"."""
    native.sh_test(
        name = name,
        size = "medium",
        srcs = ["//tests/support:run_fuzzer.sh"],
        args = [
            "$(location %s)" % fuzzer,
            "$(location %s)" % seed,
            str(seconds),
        ],
        data = [fuzzer] + corpus,
        tags = ["fuzz"],
    )
