#!/bin/bash
#SBATCH --requeue
python task.py
