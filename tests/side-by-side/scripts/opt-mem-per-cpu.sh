#!/bin/bash
#SBATCH -c 2 --mem-per-cpu=1000M
python task.py
