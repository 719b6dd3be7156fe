#!/bin/bash
#SBATCH -o on-%N.txt
python task.py
