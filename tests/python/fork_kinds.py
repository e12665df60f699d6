# Every way a Python program starts a child after pyverbs RDMA init, one per run:
#   fork_kinds.py preexec   subprocess.run(["true"], preexec_fn=os.setsid): a real fork in
#                           _posixsubprocess.fork_exec whose child execs right away
#   fork_kinds.py osfork    os.fork() in user code; the child _exits at once
#   fork_kinds.py mpfork    multiprocessing.get_context("fork").Process(...).start()
# Prints what happened ("true exited 0", "child exited 0", "fork raised <Exception>"), then "done".
import multiprocessing
import os
import subprocess
import sys

import verbs_only


def work():
    pass


def main():
    kind = sys.argv[1]
    rdma = verbs_only.open_rdma()
    try:
        if kind == "preexec":
            done = subprocess.run(["true"], preexec_fn=os.setsid)  # MARK:preexec
            print("true exited", done.returncode, flush=True)
        elif kind == "osfork":
            pid = os.fork()  # MARK:osfork
            if pid == 0:
                os._exit(0)
            _, status = os.waitpid(pid, 0)
            print("child exited", os.waitstatus_to_exitcode(status), flush=True)
        elif kind == "mpfork":
            p = multiprocessing.get_context("fork").Process(target=work)
            p.start()  # MARK:mpfork
            p.join()
            print("child exited", p.exitcode, flush=True)
    except OSError as err:
        print("fork raised", type(err).__name__, flush=True)
    del rdma
    print("done", flush=True)


main()
