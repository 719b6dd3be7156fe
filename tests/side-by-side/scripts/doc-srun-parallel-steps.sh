#!/bin/bash
# srun(1) EXAMPLES: steps run side by side as processors become free.
#SBATCH -n 9
srun -n4 prog1 &
srun -n3 prog2 &
srun -n1 prog3 &
srun -n1 prog4 &
wait
