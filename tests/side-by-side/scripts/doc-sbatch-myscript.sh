#!/bin/sh
# sbatch(1) EXAMPLES: a 1 minute time limit, srun hostname | sort.
#SBATCH --time=1
srun hostname | sort
