#!/bin/bash
#SBATCH --array=0-1
python task.py
