#!/bin/bash
#SBATCH -J renamed
#SBATCH -o %x.out
python task.py
