#!/bin/bash
#SBATCH -n 1
python task.py
exit 3
