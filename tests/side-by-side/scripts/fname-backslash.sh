#!/bin/bash
#SBATCH -o literal\%j.txt
python task.py
