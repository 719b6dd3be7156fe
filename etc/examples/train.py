"""A minimal DistributedDataParallel training loop for flexrun.

flexrun sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT for every rank, and makes each rank's
MIG leaf its only visible CUDA device. So the device is always 0: never call
torch.cuda.set_device(LOCAL_RANK) here, the other ranks' leaves are invisible to this process.
The NCCL variables for collectives across MIG instances (NCCL_MIG_ID, or
NCCL_MULTI_RANK_GPU_ENABLE=1 with NCCL_P2P_DISABLE=1) are set by flexrun as well.
"""

import argparse
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()

    # On a GPU host each rank has its leaf as device 0 and talks NCCL; without CUDA (a test
    # host, a laptop) the same loop runs on the CPU over gloo.
    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    dist.init_process_group("nccl" if cuda else "gloo")  # env:// rendezvous from flexrun
    if cuda:
        torch.cuda.set_device(0)  # this rank's leaf, whatever its RANK
    rank, world = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10)
    ).to(device)
    model = DistributedDataParallel(model, device_ids=[0] if cuda else None)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = torch.nn.CrossEntropyLoss()

    gen = torch.Generator(device=device).manual_seed(1234 + rank)
    for epoch in range(args.epochs):
        for _ in range(args.steps):
            x = torch.randn(args.batch_size, 512, device=device, generator=gen)
            y = torch.randint(0, 10, (args.batch_size,), device=device, generator=gen)
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            loss.backward()  # gradients are all-reduced across the leaves here
            opt.step()
        total = loss.detach().clone()
        dist.all_reduce(total)
        if rank == 0:
            print(f"epoch {epoch}: mean loss {total.item() / world:.4f} over {world} ranks")

    dist.destroy_process_group()


if __name__ == "__main__":
    if "RANK" not in os.environ:
        raise SystemExit("run me with flexrun inside a Flex job: flexrun python train.py")
    main()
