#!/bin/sh
# srun(1) EXAMPLES: a machine file for mpirun, built with srun -l.
#SBATCH -N 1 -n 4
MACHINEFILE="nodes.$SLURM_JOB_ID"
srun -l hostname | sort -n | awk '{print $2}' > $MACHINEFILE
python mpi-app.py -np $SLURM_NTASKS -machinefile $MACHINEFILE
rm $MACHINEFILE
