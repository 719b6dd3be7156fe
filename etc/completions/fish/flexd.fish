# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_flexd_global_optspecs
    string join \n config= socket= state-dir= topology= force-topology v/verbose h/help V/version
end

function __fish_flexd_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_flexd_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_flexd_using_subcommand
    set -l cmd (__fish_flexd_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c flexd -n "__fish_flexd_needs_command" -l config -d 'Config file over the compiled-in defaults (etc/flexd.toml documents every key)' -r -F
complete -c flexd -n "__fish_flexd_needs_command" -l socket -d 'Unix socket to listen on (overrides `socket`)' -r -F
complete -c flexd -n "__fish_flexd_needs_command" -l state-dir -d 'Directory of the database and the supervisors\' files (overrides `state_dir`)' -r -F
complete -c flexd -n "__fish_flexd_needs_command" -l topology -d 'Simulated topology used when NVML finds no GPU (overrides `topology`)' -r -F
complete -c flexd -n "__fish_flexd_needs_command" -l force-topology -d 'Use the topology file even when NVML finds GPUs'
complete -c flexd -n "__fish_flexd_needs_command" -s v -l verbose -d 'More log output (-v debug, -vv trace); FLEX_LOG (an env filter) overrides'
complete -c flexd -n "__fish_flexd_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c flexd -n "__fish_flexd_needs_command" -s V -l version -d 'Print version'
complete -c flexd -n "__fish_flexd_needs_command" -f -a "supervise" -d 'Internal: fork a supervisor for each job flexd sends on stdin (started once by flexd)'
complete -c flexd -n "__fish_flexd_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c flexd -n "__fish_flexd_using_subcommand supervise" -l run-dir -r -F
complete -c flexd -n "__fish_flexd_using_subcommand supervise" -s h -l help -d 'Print help'
complete -c flexd -n "__fish_flexd_using_subcommand help; and not __fish_seen_subcommand_from supervise help" -f -a "supervise" -d 'Internal: fork a supervisor for each job flexd sends on stdin (started once by flexd)'
complete -c flexd -n "__fish_flexd_using_subcommand help; and not __fish_seen_subcommand_from supervise help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
