#!/bin/sh
# srun(1) EXAMPLES: different work by SLURM_NODEID.
#SBATCH -n 2
srun sh -c 'case $SLURM_NODEID in 0) python node0.py ;; 1) python node1.py ;; esac'
