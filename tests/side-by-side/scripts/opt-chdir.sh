#!/bin/bash
#SBATCH -D sub
#SBATCH -o out-%j.txt
python task.py
