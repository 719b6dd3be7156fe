
#!/bin/bash
# Data-parallel PyTorch training on four leaves (MIG instances), possibly on different GPUs.
# flexrun starts one rank per leaf; no torchrun needed. Submit with: flexsub ddp.sh
#FLEX --job-name=ddp
#FLEX --leaves 4                # four 1g.5gb leaves (a job of more than one leaf prefers 1g.5gb)
#FLEX --cpus-per-gpu 4          # four cores per leaf, from the NUMA node of the leaf's GPU
#FLEX --time 2:00:00
#FLEX --output ddp-%j.out
set -euo pipefail
# The job starts where flexsub ran. $0 is not the submitted file (flexd hands the job a copy, as
# Slurm does), so find files from the submit directory, never from "$(dirname "$0")".
cd "$FLEX_SUBMIT_DIR"
echo "job $FLEX_JOB_ID on $FLEX_HOST: leaves $FLEX_MIG_UUIDS, cores $FLEX_CPUS"
flexrun --label python train.py --epochs 3
