#!/bin/bash
#SBATCH --nice=10
python task.py
