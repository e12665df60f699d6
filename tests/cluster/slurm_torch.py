# A Slurm task of the pyverbs + DataLoader job (tests/cluster/torch_job.py): srun starts
# it directly, one task per rank, so it gives torch.distributed what torchrun would from
# Slurm's own variables (RANK = SLURM_PROCID, WORLD_SIZE = SLURM_NTASKS, LOCAL_RANK =
# SLURM_LOCALID; the rendezvous on node0, a port from the job id), says which job, step
# and rank it is, and runs torch_job.py (TORCH_JOB=orders|error) as __main__.
import os
import runpy
import socket

env = os.environ
env["RANK"] = env["SLURM_PROCID"]
env["WORLD_SIZE"] = env["SLURM_NTASKS"]
env["LOCAL_RANK"] = env["SLURM_LOCALID"]
env.setdefault("MASTER_ADDR", env.get("CLUSTER_MASTER", "node0"))
env.setdefault("MASTER_PORT", str(29600 + int(env["SLURM_JOB_ID"]) % 300))
print(f"slurm_torch: job {env['SLURM_JOB_ID']} step {env.get('SLURM_STEP_ID', '?')} "
      f"rank {env['RANK']} on {socket.gethostname()}", flush=True)
runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_job.py"),
               run_name="__main__")
