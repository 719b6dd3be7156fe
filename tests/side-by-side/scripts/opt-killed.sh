#!/bin/bash
#SBATCH -n 1
python task.py
kill -9 $$
