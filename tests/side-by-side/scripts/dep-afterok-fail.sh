#!/bin/bash
# Followed by dep.then.sh with --dependency=afterok:<this job>, which can never start.
#SBATCH -J first
fail 1
