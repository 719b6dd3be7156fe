
#!/bin/bash
# A quarter of a GPU. On a MIG GPU that is ceil(0.25 x 7) = 2 compute slices' worth of leaves;
# on a whole (non-MIG) GPU it is a 0.25 share of one GPU, placed best-fit beside other shares,
# with CUDA MPS limits in the environment (FLEX_GPU_FRACTION, CUDA_MPS_ACTIVE_THREAD_PERCENTAGE,
# CUDA_MPS_PINNED_DEVICE_MEM_LIMIT), enforced when an MPS control daemon runs.
#FLEX --job-name=quarter
#FLEX --gpu-fraction 0.25
#FLEX --time 20m
#FLEX --output fraction-%j.out
echo "units: $FLEX_MIG_UUIDS (fraction: ${FLEX_GPU_FRACTION:-whole leaves})"
nvidia-smi -L 2>/dev/null || echo "nvidia-smi is not available here"
