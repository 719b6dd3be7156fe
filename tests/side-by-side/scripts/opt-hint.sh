#!/bin/bash
#SBATCH --hint=nomultithread -c 2
srun python task.py
