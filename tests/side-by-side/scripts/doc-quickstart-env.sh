#!/bin/bash
# quickstart.html: a batch job that prints its environment and runs srun.
#SBATCH -J envtest -n 2
env | grep -c SLURM_ > /dev/null
srun -l python hello.py
