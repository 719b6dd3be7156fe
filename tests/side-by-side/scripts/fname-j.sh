#!/bin/bash
#SBATCH -o out-%j.txt -e err-%j.txt
python task.py
