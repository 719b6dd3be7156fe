#!/bin/bash
#SBATCH -n 2
srun fail 2
echo after
