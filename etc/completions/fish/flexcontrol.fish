# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_flexcontrol_global_optspecs
    string join \n h/help V/version
end

function __fish_flexcontrol_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_flexcontrol_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_flexcontrol_using_subcommand
    set -l cmd (__fish_flexcontrol_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c flexcontrol -n "__fish_flexcontrol_needs_command" -s h -l help -d 'Print help'
complete -c flexcontrol -n "__fish_flexcontrol_needs_command" -s V -l version -d 'Print version'
complete -c flexcontrol -n "__fish_flexcontrol_needs_command" -f -a "hold" -d 'Keep pending jobs from starting (JobHeldUser; JobHeldAdmin when root holds them)'
complete -c flexcontrol -n "__fish_flexcontrol_needs_command" -f -a "release" -d 'Let held jobs start again (a job root held only root may release)'
complete -c flexcontrol -n "__fish_flexcontrol_needs_command" -f -a "requeue" -d 'Put running or finished jobs back in the queue, under the same id (a running one is ended first, with flexd\'s kill grace)'
complete -c flexcontrol -n "__fish_flexcontrol_needs_command" -f -a "requeuehold" -d 'Like requeue, and hold the jobs'
complete -c flexcontrol -n "__fish_flexcontrol_needs_command" -f -a "update" -d 'Change a pending job: TimeLimit=TIME (only root raises it), JobName=NAME (also while it runs), Priority=N and Nice=N (root)'
complete -c flexcontrol -n "__fish_flexcontrol_needs_command" -f -a "show" -d 'Show jobs in full, scontrol\'s KEY=VALUE layout; flexd\'s configuration, the host\'s resources and where job limits are enforced (`show config`); or the host as Slurm\'s one partition, `flex` (`show partition`)'
complete -c flexcontrol -n "__fish_flexcontrol_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c flexcontrol -n "__fish_flexcontrol_using_subcommand hold" -s h -l help -d 'Print help'
complete -c flexcontrol -n "__fish_flexcontrol_using_subcommand release" -s h -l help -d 'Print help'
complete -c flexcontrol -n "__fish_flexcontrol_using_subcommand requeue" -s h -l help -d 'Print help'
complete -c flexcontrol -n "__fish_flexcontrol_using_subcommand requeuehold" -s h -l help -d 'Print help'
complete -c flexcontrol -n "__fish_flexcontrol_using_subcommand update" -s h -l help -d 'Print help'
complete -c flexcontrol -n "__fish_flexcontrol_using_subcommand show" -l json -d 'Print JSON'
complete -c flexcontrol -n "__fish_flexcontrol_using_subcommand show" -s o -l oneliner -d 'Each job or partition on one line (scontrol\'s `-o`)'
complete -c flexcontrol -n "__fish_flexcontrol_using_subcommand show" -s h -l help -d 'Print help'
complete -c flexcontrol -n "__fish_flexcontrol_using_subcommand help; and not __fish_seen_subcommand_from hold release requeue requeuehold update show help" -f -a "hold" -d 'Keep pending jobs from starting (JobHeldUser; JobHeldAdmin when root holds them)'
complete -c flexcontrol -n "__fish_flexcontrol_using_subcommand help; and not __fish_seen_subcommand_from hold release requeue requeuehold update show help" -f -a "release" -d 'Let held jobs start again (a job root held only root may release)'
complete -c flexcontrol -n "__fish_flexcontrol_using_subcommand help; and not __fish_seen_subcommand_from hold release requeue requeuehold update show help" -f -a "requeue" -d 'Put running or finished jobs back in the queue, under the same id (a running one is ended first, with flexd\'s kill grace)'
complete -c flexcontrol -n "__fish_flexcontrol_using_subcommand help; and not __fish_seen_subcommand_from hold release requeue requeuehold update show help" -f -a "requeuehold" -d 'Like requeue, and hold the jobs'
complete -c flexcontrol -n "__fish_flexcontrol_using_subcommand help; and not __fish_seen_subcommand_from hold release requeue requeuehold update show help" -f -a "update" -d 'Change a pending job: TimeLimit=TIME (only root raises it), JobName=NAME (also while it runs), Priority=N and Nice=N (root)'
complete -c flexcontrol -n "__fish_flexcontrol_using_subcommand help; and not __fish_seen_subcommand_from hold release requeue requeuehold update show help" -f -a "show" -d 'Show jobs in full, scontrol\'s KEY=VALUE layout; flexd\'s configuration, the host\'s resources and where job limits are enforced (`show config`); or the host as Slurm\'s one partition, `flex` (`show partition`)'
complete -c flexcontrol -n "__fish_flexcontrol_using_subcommand help; and not __fish_seen_subcommand_from hold release requeue requeuehold update show help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
