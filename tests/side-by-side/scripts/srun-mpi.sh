#!/bin/bash
#SBATCH -n 2
srun --mpi=pmi2 python task.py
