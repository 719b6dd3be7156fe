#!/bin/bash
#SBATCH -o out-%J-%s-%t-%n.txt
python task.py
