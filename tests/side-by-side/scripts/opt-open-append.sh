#!/bin/bash
#SBATCH --open-mode=append -o same.out
python task.py
