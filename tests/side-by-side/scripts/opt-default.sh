#!/bin/bash
# No option: one task, one core, no GPU.
srun python task.py
