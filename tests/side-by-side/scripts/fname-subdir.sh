#!/bin/bash
#SBATCH -o logs/%x-%j.out
mkdir -p logs
python task.py
