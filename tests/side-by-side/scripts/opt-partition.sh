#!/bin/bash
#SBATCH -p gpu
python task.py
