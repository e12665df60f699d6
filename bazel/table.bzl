"""forkguard_table: one target per row of a table, for the targets of a package that share a
shape (the same rule, deps, data, tags), so that the shared part is written once and each row
says only what is its own.

    forkguard_table(
        forkguard_cc_test,
        deps = ["//tests/support:runfiles"],      # every row's
        rows = {
            "a_test": dict(data = [":a"]),          # deps = ["//tests/support:runfiles"]
            "b_test": dict(deps = [":b"], size = "small"),
        },
    )

A row's list attribute (deps, data, tags, srcs, local_defines, linkopts, ...) comes after the
shared one of the same name; a row's other attributes (size, rdma, linkstatic, ...) replace the
shared value. Targets keep the rule's own defaults (forkguard_cc_test: srcs = [name + ".cc"])."""

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
