# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_flexgres_global_optspecs
    string join \n h/help V/version
end

function __fish_flexgres_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_flexgres_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_flexgres_using_subcommand
    set -l cmd (__fish_flexgres_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c flexgres -n "__fish_flexgres_needs_command" -s h -l help -d 'Print help'
complete -c flexgres -n "__fish_flexgres_needs_command" -s V -l version -d 'Print version'
complete -c flexgres -n "__fish_flexgres_needs_command" -f -a "conf" -d 'Print gres.conf lines: one per MIG leaf, with its device files and near cores (accepted by `slurmd -G`)'
complete -c flexgres -n "__fish_flexgres_needs_command" -f -a "node" -d 'Print slurm.conf\'s NodeName line for this host, with Gres= (compare `slurmd -C`)'
complete -c flexgres -n "__fish_flexgres_needs_command" -f -a "job-submit" -d 'Print a job_submit.lua that gives untyped GPU requests Flex-MIG\'s size-aware leaf type (optional; for slurmctld\'s JobSubmitPlugins=lua)'
complete -c flexgres -n "__fish_flexgres_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c flexgres -n "__fish_flexgres_using_subcommand conf" -l topology -d 'The simulated topology file used when NVML finds no GPU (a shipped name such as a100-40gb-x2.toml, or a path)' -r -F
complete -c flexgres -n "__fish_flexgres_using_subcommand conf" -l node -d 'Prefix each line with NodeName=NAME (one gres.conf for several nodes)' -r
complete -c flexgres -n "__fish_flexgres_using_subcommand conf" -l device-root -d 'Directory prefixed to every device path (a simulated host\'s device files)' -r
complete -c flexgres -n "__fish_flexgres_using_subcommand conf" -l mig-minors -d 'The driver\'s table of MIG capability minors' -r -F
complete -c flexgres -n "__fish_flexgres_using_subcommand conf" -l force-topology -d 'Use the topology file even where NVML finds GPUs'
complete -c flexgres -n "__fish_flexgres_using_subcommand conf" -l count-only -d 'One Count= line per profile and GPU, without device files (for trying Slurm out; Slurm then sets no CUDA_VISIBLE_DEVICES)'
complete -c flexgres -n "__fish_flexgres_using_subcommand conf" -s h -l help -d 'Print help'
complete -c flexgres -n "__fish_flexgres_using_subcommand node" -l topology -d 'The simulated topology file used when NVML finds no GPU (a shipped name such as a100-40gb-x2.toml, or a path)' -r -F
complete -c flexgres -n "__fish_flexgres_using_subcommand node" -l name -d 'The node\'s name in slurm.conf (default: the host\'s name)' -r
complete -c flexgres -n "__fish_flexgres_using_subcommand node" -l force-topology -d 'Use the topology file even where NVML finds GPUs'
complete -c flexgres -n "__fish_flexgres_using_subcommand node" -s h -l help -d 'Print help'
complete -c flexgres -n "__fish_flexgres_using_subcommand job-submit" -l topology -d 'The simulated topology file used when NVML finds no GPU (a shipped name such as a100-40gb-x2.toml, or a path)' -r -F
complete -c flexgres -n "__fish_flexgres_using_subcommand job-submit" -l small -d 'The leaf type of multi-leaf jobs (default: the smallest 1-slice MIG profile here)' -r
complete -c flexgres -n "__fish_flexgres_using_subcommand job-submit" -l large -d 'The leaf type of one-leaf jobs (default: the 1-slice MIG profile with the most memory)' -r
complete -c flexgres -n "__fish_flexgres_using_subcommand job-submit" -l force-topology -d 'Use the topology file even where NVML finds GPUs'
complete -c flexgres -n "__fish_flexgres_using_subcommand job-submit" -s h -l help -d 'Print help'
complete -c flexgres -n "__fish_flexgres_using_subcommand help; and not __fish_seen_subcommand_from conf node job-submit help" -f -a "conf" -d 'Print gres.conf lines: one per MIG leaf, with its device files and near cores (accepted by `slurmd -G`)'
complete -c flexgres -n "__fish_flexgres_using_subcommand help; and not __fish_seen_subcommand_from conf node job-submit help" -f -a "node" -d 'Print slurm.conf\'s NodeName line for this host, with Gres= (compare `slurmd -C`)'
complete -c flexgres -n "__fish_flexgres_using_subcommand help; and not __fish_seen_subcommand_from conf node job-submit help" -f -a "job-submit" -d 'Print a job_submit.lua that gives untyped GPU requests Flex-MIG\'s size-aware leaf type (optional; for slurmctld\'s JobSubmitPlugins=lua)'
complete -c flexgres -n "__fish_flexgres_using_subcommand help; and not __fish_seen_subcommand_from conf node job-submit help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
