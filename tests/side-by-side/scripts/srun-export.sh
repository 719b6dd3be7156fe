#!/bin/bash
#SBATCH -n 2
srun --export=ALL,STEPVAR=1 python task.py
