complete -c flexsub -s J -l job-name -d 'Job name (default: the script\'s file name)' -r
complete -c flexsub -s t -l time -d 'Time limit: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S, or 30s, 2h, 1h30m (default: flexd\'s default_time_limit)' -r
complete -c flexsub -s o -l output -d 'stdout file; %j job id, %x job name, %u user, %A array job id, %a array task index, %N host, %J %s %n %t as sbatch, %% a percent sign; %3a pads with zeros' -r
complete -c flexsub -s e -l error -d 'stderr file (default: with stdout)' -r
complete -c flexsub -s D -l chdir -d 'Working directory of the job (default: the current one)' -r
complete -c flexsub -s c -l cpus-per-task -d 'CPU cores per task, as in Slurm: the job gets N x ntasks cores (at least flexd\'s default_cpus_per_leaf per leaf)' -r
complete -c flexsub -l gres -d 'N leaves, of leaf type TYPE if given (Slurm form)' -r
complete -c flexsub -s G -l gpus -d 'N GPUs, as in Slurm: on MIG a GPU is one leaf (TYPE: a MIG profile or the host\'s GPU model)' -r
complete -c flexsub -l gpu-fraction -d 'A share of GPU compute: 0.25 of one GPU, or 1.5 GPUs; on MIG, ceil(F x 7) slices\' worth of leaves' -r
complete -c flexsub -l mem -d 'Host memory (RAM) for the job, as in Slurm: 512M, 16G; a bare number is megabytes; 0 is all of the host\'s' -r
complete -c flexsub -l mem-per-cpu -d 'Host memory per allocated core, as in Slurm' -r
complete -c flexsub -l mem-per-gpu -d 'Host memory per allocated leaf (GPU), as in Slurm' -r
complete -c flexsub -l gpu-mem -d 'GPU memory: as many leaves as hold 16G, 1.5GiB; a bare number is megabytes' -r
complete -c flexsub -s A -l account -d 'Account to charge' -r
complete -c flexsub -l leaves -d 'Number of leaves (MIG instances, or whole GPUs without MIG)' -r
complete -c flexsub -l leaf-type -d 'Only leaves of this MIG profile (1g.10gb)' -r
complete -c flexsub -l placement -d 'Shares of whole GPUs: fill-first, balance-load or memory-optimized' -r
complete -c flexsub -l model -d 'Size GPU memory from this model (directory, .safetensors or config.json)' -r
complete -c flexsub -l batch-size -d 'Batch size for --model' -r
complete -c flexsub -l seq-len -d 'Sequence length for --model' -r
complete -c flexsub -l dtype -d 'Element type for --model: fp32, fp16, bf16, int8, fp8, int4' -r
complete -c flexsub -s q -l qos -d 'Quality of service, as flexd.toml\'s [qos.NAME] defines it (default: its default_qos)' -r
complete -c flexsub -l nice -d 'Lower the job\'s priority by N (-10000 to 10000; below 0 only for root)' -r
complete -c flexsub -s a -l array -d 'A job array, a task per index: 0-15, 1,3,7, 1-9:2, combined; %N runs at most N tasks at once (0-99%4)' -r
complete -c flexsub -s d -l dependency -d 'Start after other jobs: after, afterany, afterok, afternotok, aftercorr:ID[:ID...], singleton; \',\' all of them, \'?\' any' -r
complete -c flexsub -l signal -d 'Send SIG (a name or number) SECONDS (default 60) before the time limit; with B: to the batch shell only, else to the whole job' -r
complete -c flexsub -s N -l nodes -d 'Node count; Flex runs a job on one host, so only 1' -r
complete -c flexsub -l export -d 'Environment to export, as sbatch: ALL (the default), NONE, or only the VARs named (with ALL: all and these), VAR=VALUE setting one' -r
complete -c flexsub -s n -l ntasks -d 'Number of tasks, for -c and --gpus-per-task (flexrun still starts one rank per leaf)' -r
complete -c flexsub -l ntasks-per-node -d 'Tasks on the one node: as --ntasks' -r
complete -c flexsub -l tasks-per-node -d 'sbatch\'s other name for --ntasks-per-node' -r
complete -c flexsub -l gpus-per-node -d 'GPUs on the one node: as --gpus [TYPE:]N (a GPU is one leaf)' -r
complete -c flexsub -l gpus-per-task -d 'GPUs (leaves) per task: N x ntasks leaves (ntasks from -n, --ntasks-per-node, else 1), each task srun starts sees its own' -r
complete -c flexsub -l cpus-per-gpu -d 'CPU cores per leaf (overrides -c)' -r
complete -c flexsub -s w -l nodelist -d 'Hosts to run on: must name this host (short name or FQDN)' -r
complete -c flexsub -s x -l exclude -d 'Hosts not to run on: must not name this host' -r
complete -c flexsub -l comment -d 'A comment, shown by flexq -o %k and flexcontrol show job' -r
complete -c flexsub -s b -l begin -d 'Start no earlier: now+60 (seconds), now+1hour, 16:00, 2026-12-01T10:00, tomorrow' -r
complete -c flexsub -l exclusive -d 'The whole host: every leaf and every core (=user, =mcs, =topo: ignored with a warning)' -r
complete -c flexsub -l open-mode -d 'How output files are opened (default truncate)' -r
complete -c flexsub -s C -l constraint -d 'Host features the job needs (a100, h100, 80gb, 1g.10gb), with & and |' -r
complete -c flexsub -l mail-type -d 'Mail on BEGIN, END, FAIL, REQUEUE, ALL, TIME_LIMIT[_90|_80|_50], when flexd has a sendmail' -r
complete -c flexsub -l mail-user -d 'Whom the mail goes to (default: the submitting user)' -r
complete -c flexsub -s p -l partition -d 'Accepted and ignored: one Flex host has no partitions' -r
complete -c flexsub -l mincpus -d 'Accepted and ignored: cores come from -c or --cpus-per-gpu, on each leaf\'s NUMA node' -r
complete -c flexsub -l threads-per-core -d 'Accepted and ignored: cores come from -c or --cpus-per-gpu, on each leaf\'s NUMA node' -r
complete -c flexsub -l sockets-per-node -d 'Accepted and ignored: cores come from -c or --cpus-per-gpu, on each leaf\'s NUMA node' -r
complete -c flexsub -l cores-per-socket -d 'Accepted and ignored: cores come from -c or --cpus-per-gpu, on each leaf\'s NUMA node' -r
complete -c flexsub -l hint -d 'Accepted and ignored: cores come from -c or --cpus-per-gpu, on each leaf\'s NUMA node' -r
complete -c flexsub -l ntasks-per-core -d 'Accepted and ignored: cores come from -c or --cpus-per-gpu, on each leaf\'s NUMA node' -r
complete -c flexsub -l ntasks-per-socket -d 'Accepted and ignored: cores come from -c or --cpus-per-gpu, on each leaf\'s NUMA node' -r
complete -c flexsub -l ntasks-per-gpu -d 'Accepted and ignored: flexrun starts one rank per leaf' -r
complete -c flexsub -l mem-bind -d 'Accepted and ignored: Flex reserves host memory per host, not per NUMA node' -r
complete -c flexsub -l cpu-freq -d 'Accepted and ignored: Flex does not set clock frequencies' -r
complete -c flexsub -l gpu-freq -d 'Accepted and ignored: Flex does not set clock frequencies' -r
complete -c flexsub -s k -l no-kill -d 'Accepted and ignored: a Flex job has one node, so it never loses one and carries on' -r
complete -c flexsub -l kill-on-invalid-dep -d 'Accepted and ignored: flexd.toml\'s kill_invalid_depend decides' -r
complete -c flexsub -s Q -l quiet -d 'Accepted and ignored: flexsub prints only the job id and warnings' -r
complete -c flexsub -l gres-flags -d 'Accepted and ignored: each leaf\'s cores are on its GPU\'s NUMA node already' -r
complete -c flexsub -l gpu-bind -d 'Accepted and ignored: flexrun gives each rank its own leaf as CUDA device 0' -r
complete -c flexsub -s m -l distribution -d 'Accepted and ignored: flexrun starts one rank per leaf' -r
complete -c flexsub -l tmp -d 'Accepted and ignored: Flex does not allocate disk' -r
complete -c flexsub -s s -l oversubscribe -d 'Accepted and ignored: sharing follows the request (a --gpu-fraction below 1 shares a GPU)' -r
complete -c flexsub -l spread-job -d 'Accepted and ignored: a Flex job runs on one host' -r
complete -c flexsub -l profile -d 'Accepted and ignored: Flex gathers no profiles' -r
complete -c flexsub -l acctg-freq -d 'Accepted and ignored: flexacct keeps each job\'s totals' -r
complete -c flexsub -s L -l licenses -d 'Accepted and ignored: Flex has no licenses' -r
complete -c flexsub -l reservation -d 'Accepted and ignored: Flex has no reservations' -r
complete -c flexsub -l wckey -d 'Accepted and ignored: Flex keeps no workload keys' -r
complete -c flexsub -l cluster-constraint -d 'Accepted and ignored: a Flex host is one cluster' -r
complete -c flexsub -l contiguous -d 'Accepted and ignored: a Flex job runs on one host' -r
complete -c flexsub -s S -l core-spec -d 'Accepted and ignored: cores come from -c or --cpus-per-gpu, on each leaf\'s NUMA node' -r
complete -c flexsub -l thread-spec -d 'Accepted and ignored: cores come from -c or --cpus-per-gpu, on each leaf\'s NUMA node' -r
complete -c flexsub -s B -l extra-node-info -d 'Accepted and ignored: cores come from -c or --cpus-per-gpu, on each leaf\'s NUMA node' -r
complete -c flexsub -s O -l overcommit -d 'Accepted and ignored: cores come from -c or --cpus-per-gpu, on each leaf\'s NUMA node' -r
complete -c flexsub -l switches -d 'Accepted and ignored: a Flex job runs on one host' -r
complete -c flexsub -l use-min-nodes -d 'Accepted and ignored: a Flex job runs on one host' -r
complete -c flexsub -s r -l relative -d 'Accepted and ignored: a Flex job runs on one host' -r
complete -c flexsub -l network -d 'Accepted and ignored: Flex sets up no interconnect; ranks meet on the host' -r
complete -c flexsub -l delay-boot -d 'Accepted and ignored: Flex boots and powers no nodes' -r
complete -c flexsub -l reboot -d 'Accepted and ignored: Flex boots and powers no nodes' -r
complete -c flexsub -l power -d 'Accepted and ignored: Flex boots and powers no nodes' -r
complete -c flexsub -l mcs-label -d 'Accepted and ignored: Flex has no MCS labels; jobs are their users\' own' -r
complete -c flexsub -l ignore-pbs -d 'Accepted and ignored: Flex reads #FLEX and #SBATCH lines only' -r
complete -c flexsub -l time-min -d 'Accepted and ignored: the time limit is what backfill plans with' -r
complete -c flexsub -l priority -d 'Accepted and ignored: flexd computes priorities (root lowers one with --nice or flexcontrol update)' -r
complete -c flexsub -l propagate -d 'Accepted and ignored: a job\'s limits are its cgroup\'s, not the submitting shell\'s rlimits' -r
complete -c flexsub -s v -l verbose -d 'Accepted and ignored: flexsub prints the job id, warnings and notes' -r
complete -c flexsub -l bb -d 'Refused: Flex has no burst buffers; stage data in the script' -r
complete -c flexsub -l bbf -d 'Refused: Flex has no burst buffers; stage data in the script' -r
complete -c flexsub -l deadline -d 'Refused: Flex does not cancel jobs that cannot end by a deadline; give a --time and --begin instead' -r
complete -c flexsub -l export-file -d 'Refused: the job gets the submitting environment; set variables with --export=ALL,VAR=VALUE' -r
complete -c flexsub -l gpus-per-socket -d 'Refused: Flex places leaves by NUMA node, not socket; ask --gpus (or --gres=gpu:N)' -r
complete -c flexsub -s i -l input -d 'Refused: a batch script\'s standard input is /dev/null; redirect within the script' -r
complete -c flexsub -s F -l nodefile -d 'Refused: a Flex job runs on this host; -w names it' -r
complete -c flexsub -l container -d 'Refused: Flex runs no pyxis/enroot containers; start the container from the script (enroot start, apptainer exec, docker run)' -r
complete -c flexsub -l container-image -d 'Refused: Flex runs no pyxis/enroot containers; start the container from the script (enroot start, apptainer exec, docker run)' -r
complete -c flexsub -l container-mounts -d 'Refused: Flex runs no pyxis/enroot containers; start the container from the script (enroot start, apptainer exec, docker run)' -r
complete -c flexsub -l container-workdir -d 'Refused: Flex runs no pyxis/enroot containers; start the container from the script (enroot start, apptainer exec, docker run)' -r
complete -c flexsub -l container-name -d 'Refused: Flex runs no pyxis/enroot containers; start the container from the script (enroot start, apptainer exec, docker run)' -r
complete -c flexsub -l uid -d 'Refused: a job runs as the user who submits it' -r
complete -c flexsub -l gid -d 'Refused: a job runs with the submitting user\'s groups' -r
complete -c flexsub -l get-user-env -d 'Accepted and ignored: the job gets the submitting environment (as --export gives it), not a login shell\'s' -r
complete -c flexsub -s M -l clusters -d 'Clusters to submit to: this host\'s (flex) or all; Flex is one host' -r
complete -c flexsub -l wrap -d 'Run CMD with /bin/sh instead of a script' -r
complete -c flexsub -l usage -d 'Print help (sbatch\'s --usage)'
complete -c flexsub -l train -d '--model is trained (gradients, optimizer state)'
complete -c flexsub -l infer -d '--model only runs inference (KV cache)'
complete -c flexsub -s H -l hold -d 'Submit held (JobHeldUser) until `flexcontrol release`'
complete -c flexsub -l requeue -d 'The job may be requeued (the default)'
complete -c flexsub -l no-requeue -d 'The job may not be requeued'
complete -c flexsub -l parsable -d 'Print only the job id'
complete -c flexsub -s W -l wait -d 'Return when the job ends, with its exit code (1 when it failed otherwise)'
complete -c flexsub -l test-only -d 'Print where and when the job would start; queue nothing'
complete -c flexsub -l estimate-only -d 'Print the --model memory estimate and what it needs on this host; queue nothing'
complete -c flexsub -l json -d 'With --test-only or --estimate-only: print JSON'
complete -c flexsub -s h -l help -d 'Print help (see more with \'--help\')'
complete -c flexsub -s V -l version -d 'Print version'
