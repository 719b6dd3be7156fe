# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_flexsim_global_optspecs
    string join \n v/verbose h/help V/version
end

function __fish_flexsim_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_flexsim_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_flexsim_using_subcommand
    set -l cmd (__fish_flexsim_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c flexsim -n "__fish_flexsim_needs_command" -s v -l verbose -d 'More log output (-v info, -vv debug); FLEX_LOG overrides'
complete -c flexsim -n "__fish_flexsim_needs_command" -s h -l help -d 'Print help'
complete -c flexsim -n "__fish_flexsim_needs_command" -s V -l version -d 'Print version'
complete -c flexsim -n "__fish_flexsim_needs_command" -f -a "run" -d 'Replay one trace under one model and policy and print its metrics'
complete -c flexsim -n "__fish_flexsim_needs_command" -f -a "gen" -d 'Write one of the paper\'s synthetic traces'
complete -c flexsim -n "__fish_flexsim_needs_command" -f -a "compare" -d 'Run every model and policy over generated traces and compare them'
complete -c flexsim -n "__fish_flexsim_needs_command" -f -a "sweep" -d 'Policies x models over many seeds, categories, kinds and trace shapes: one table'
complete -c flexsim -n "__fish_flexsim_needs_command" -f -a "fairness" -d 'Replay a multi-user trace (its `user` column) in FIFO order and with flexd\'s fair share: each user\'s mean wait and slowdown, and Jain\'s index, side by side'
complete -c flexsim -n "__fish_flexsim_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c flexsim -n "__fish_flexsim_using_subcommand run" -l trace -d 'Trace CSV: job_id,submit_s,leaves,duration_s,kind and optional columns (mem_gb, time_limit_s, after, user, cpus, host_mem; see docs/flexsim.md)' -r -F
complete -c flexsim -n "__fish_flexsim_using_subcommand run" -l model -r -f -a "fm\t'Flex-MIG: one job over many fixed leaves'
dm\t'Dynamic-MIG: one instance per job, reconfigured on demand'
sm\t'Static-MIG: one instance per job from a fixed layout'"
complete -c flexsim -n "__fish_flexsim_using_subcommand run" -l policy -d 'fifo, backfill (EASY) or conservative, optionally with a queue order: backfill:shortest, conservative:adaptive (orders: submit, shortest, longest, adaptive)' -r
complete -c flexsim -n "__fish_flexsim_using_subcommand run" -l flexd-config -d 'Replay the policy, window, queue order and aging that this flexd.toml gives flexd (its other keys are flexd\'s and ignored here); overrides --policy and --window' -r -F
complete -c flexsim -n "__fish_flexsim_using_subcommand run" -l drain-s -d 'Seconds a Dynamic-MIG reconfiguration drains its GPU (the paper measured 100-120)' -r
complete -c flexsim -n "__fish_flexsim_using_subcommand run" -l config -d 'Execution-time model overrides (see etc/flexsim.toml)' -r -F
complete -c flexsim -n "__fish_flexsim_using_subcommand run" -l window -d 'Backfill candidates behind the head; 0 for the whole queue' -r
complete -c flexsim -n "__fish_flexsim_using_subcommand run" -l topology -d 'Topology: a file, or a shipped one (a100-40gb-x2, h100-80gb-x8)' -r
complete -c flexsim -n "__fish_flexsim_using_subcommand run" -l hosts -d 'Copies of the topology\'s host' -r
complete -c flexsim -n "__fish_flexsim_using_subcommand run" -l host-mem-gib -d 'Host memory (RAM) of each host in GiB, in place of the topology\'s memory_gib; 0 for no limit. Only a trace\'s host_mem column (or ReqMem) asks for host memory' -r
complete -c flexsim -n "__fish_flexsim_using_subcommand run" -l gantt -d 'Also write a Gantt chart of the run (SVG)' -r -F
complete -c flexsim -n "__fish_flexsim_using_subcommand run" -l jobs-out -d 'Also write every job\'s times (CSV), and its simulated GPU usage where the topology names a telemetry source' -r -F
complete -c flexsim -n "__fish_flexsim_using_subcommand run" -l telemetry-period-s -d 'Seconds between simulated GPU telemetry samples of a job (where the topology names a samples file or telemetry_seed), as flexd.toml\'s telemetry_period' -r
complete -c flexsim -n "__fish_flexsim_using_subcommand run" -l json -d 'Print JSON instead of a table'
complete -c flexsim -n "__fish_flexsim_using_subcommand run" -l csv -d 'Print CSV (a header and one row) instead of a table'
complete -c flexsim -n "__fish_flexsim_using_subcommand run" -s v -l verbose -d 'More log output (-v info, -vv debug); FLEX_LOG overrides'
complete -c flexsim -n "__fish_flexsim_using_subcommand run" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c flexsim -n "__fish_flexsim_using_subcommand gen" -l category -r -f -a "small\t''
balanced\t''
large\t''"
complete -c flexsim -n "__fish_flexsim_using_subcommand gen" -l kind -r -f -a "train\t''
infer\t''
mixed\t''"
complete -c flexsim -n "__fish_flexsim_using_subcommand gen" -l seed -r
complete -c flexsim -n "__fish_flexsim_using_subcommand gen" -l out -r -F
complete -c flexsim -n "__fish_flexsim_using_subcommand gen" -l jobs -d 'Number of jobs (default: the paper\'s, Table 2 doubled)' -r
complete -c flexsim -n "__fish_flexsim_using_subcommand gen" -l max-size -d 'Largest job size (the paper\'s Figure 7 uses 4)' -r
complete -c flexsim -n "__fish_flexsim_using_subcommand gen" -l oversize -d 'What happens to jobs above --max-size: left out (drop) or made smaller (clamp)' -r -f -a "drop\t'Leave them out of the trace'
clamp\t'Lower their size to the cap (the default: it keeps the paper\'s 62–64 jobs per trace)'"
complete -c flexsim -n "__fish_flexsim_using_subcommand gen" -l load -d 'Offered load: 1.0 submits work as fast as perfectly packed leaves run it' -r
complete -c flexsim -n "__fish_flexsim_using_subcommand gen" -l duration-mix -d 'Weights of short:medium:long durations' -r
complete -c flexsim -n "__fish_flexsim_using_subcommand gen" -l topology -d 'Topology: a file, or a shipped one (a100-40gb-x2, h100-80gb-x8)' -r
complete -c flexsim -n "__fish_flexsim_using_subcommand gen" -l hosts -d 'Copies of the topology\'s host' -r
complete -c flexsim -n "__fish_flexsim_using_subcommand gen" -l host-mem-gib -d 'Host memory (RAM) of each host in GiB, in place of the topology\'s memory_gib; 0 for no limit. Only a trace\'s host_mem column (or ReqMem) asks for host memory' -r
complete -c flexsim -n "__fish_flexsim_using_subcommand gen" -s v -l verbose -d 'More log output (-v info, -vv debug); FLEX_LOG overrides'
complete -c flexsim -n "__fish_flexsim_using_subcommand gen" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c flexsim -n "__fish_flexsim_using_subcommand compare" -l traces-per-category -r
complete -c flexsim -n "__fish_flexsim_using_subcommand compare" -l seed -d 'Trace i of each category uses seed + i' -r
complete -c flexsim -n "__fish_flexsim_using_subcommand compare" -l categories -r -f -a "small\t''
balanced\t''
large\t''"
complete -c flexsim -n "__fish_flexsim_using_subcommand compare" -l kinds -r -f -a "train\t''
infer\t''
mixed\t''"
complete -c flexsim -n "__fish_flexsim_using_subcommand compare" -l policies -r
complete -c flexsim -n "__fish_flexsim_using_subcommand compare" -l models -r -f -a "fm\t'Flex-MIG: one job over many fixed leaves'
dm\t'Dynamic-MIG: one instance per job, reconfigured on demand'
sm\t'Static-MIG: one instance per job from a fixed layout'"
complete -c flexsim -n "__fish_flexsim_using_subcommand compare" -l max-size -d 'Largest job size (the paper\'s Figure 7 uses 4); 0 keeps Table 2\'s sizes, and Static-MIG then drops out of the training traces, which have jobs above 4' -r
complete -c flexsim -n "__fish_flexsim_using_subcommand compare" -l oversize -d 'What happens to jobs above --max-size: left out (drop) or made smaller (clamp)' -r -f -a "drop\t'Leave them out of the trace'
clamp\t'Lower their size to the cap (the default: it keeps the paper\'s 62–64 jobs per trace)'"
complete -c flexsim -n "__fish_flexsim_using_subcommand compare" -l load -d 'Offered load: 1.0 submits work as fast as perfectly packed leaves run it' -r
complete -c flexsim -n "__fish_flexsim_using_subcommand compare" -l duration-mix -d 'Weights of short:medium:long durations' -r
complete -c flexsim -n "__fish_flexsim_using_subcommand compare" -l drain-s -d 'Seconds a Dynamic-MIG reconfiguration drains its GPU (the paper measured 100-120)' -r
complete -c flexsim -n "__fish_flexsim_using_subcommand compare" -l config -d 'Execution-time model overrides (see etc/flexsim.toml)' -r -F
complete -c flexsim -n "__fish_flexsim_using_subcommand compare" -l window -d 'Backfill candidates behind the head; 0 for the whole queue' -r
complete -c flexsim -n "__fish_flexsim_using_subcommand compare" -l topology -d 'Topology: a file, or a shipped one (a100-40gb-x2, h100-80gb-x8)' -r
complete -c flexsim -n "__fish_flexsim_using_subcommand compare" -l hosts -d 'Copies of the topology\'s host' -r
complete -c flexsim -n "__fish_flexsim_using_subcommand compare" -l host-mem-gib -d 'Host memory (RAM) of each host in GiB, in place of the topology\'s memory_gib; 0 for no limit. Only a trace\'s host_mem column (or ReqMem) asks for host memory' -r
complete -c flexsim -n "__fish_flexsim_using_subcommand compare" -l out-dir -d 'Where the charts, compare.json, runs.csv and ratios.csv go' -r -F
complete -c flexsim -n "__fish_flexsim_using_subcommand compare" -l json -d 'Print the comparison as JSON instead of tables'
complete -c flexsim -n "__fish_flexsim_using_subcommand compare" -s v -l verbose -d 'More log output (-v info, -vv debug); FLEX_LOG overrides'
complete -c flexsim -n "__fish_flexsim_using_subcommand compare" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c flexsim -n "__fish_flexsim_using_subcommand sweep" -l seeds -d 'Traces per shape, category and kind; trace i uses seed + i' -r
complete -c flexsim -n "__fish_flexsim_using_subcommand sweep" -l seed -r
complete -c flexsim -n "__fish_flexsim_using_subcommand sweep" -l shapes -r -f -a "paper\t''
short\t''
heavy\t''
burst\t''"
complete -c flexsim -n "__fish_flexsim_using_subcommand sweep" -l categories -r -f -a "small\t''
balanced\t''
large\t''"
complete -c flexsim -n "__fish_flexsim_using_subcommand sweep" -l kinds -r -f -a "train\t''
infer\t''
mixed\t''"
complete -c flexsim -n "__fish_flexsim_using_subcommand sweep" -l policies -d 'Policies (kind[:order]); the first, under fm, is the baseline of the ratios' -r
complete -c flexsim -n "__fish_flexsim_using_subcommand sweep" -l models -r -f -a "fm\t'Flex-MIG: one job over many fixed leaves'
dm\t'Dynamic-MIG: one instance per job, reconfigured on demand'
sm\t'Static-MIG: one instance per job from a fixed layout'"
complete -c flexsim -n "__fish_flexsim_using_subcommand sweep" -l max-size -d 'Largest job size; 0 keeps Table 2\'s sizes (Static-MIG then drops jobs above 4)' -r
complete -c flexsim -n "__fish_flexsim_using_subcommand sweep" -l load -d 'Offered load of the generated traces' -r
complete -c flexsim -n "__fish_flexsim_using_subcommand sweep" -l drain-s -d 'Seconds a Dynamic-MIG reconfiguration drains its GPU (the paper measured 100-120)' -r
complete -c flexsim -n "__fish_flexsim_using_subcommand sweep" -l config -d 'Execution-time model overrides (see etc/flexsim.toml)' -r -F
complete -c flexsim -n "__fish_flexsim_using_subcommand sweep" -l window -d 'Backfill candidates behind the head; 0 for the whole queue' -r
complete -c flexsim -n "__fish_flexsim_using_subcommand sweep" -l topology -d 'Topology: a file, or a shipped one (a100-40gb-x2, h100-80gb-x8)' -r
complete -c flexsim -n "__fish_flexsim_using_subcommand sweep" -l hosts -d 'Copies of the topology\'s host' -r
complete -c flexsim -n "__fish_flexsim_using_subcommand sweep" -l host-mem-gib -d 'Host memory (RAM) of each host in GiB, in place of the topology\'s memory_gib; 0 for no limit. Only a trace\'s host_mem column (or ReqMem) asks for host memory' -r
complete -c flexsim -n "__fish_flexsim_using_subcommand sweep" -l json -d 'Print JSON (the rows and every run) instead of the table'
complete -c flexsim -n "__fish_flexsim_using_subcommand sweep" -s v -l verbose -d 'More log output (-v info, -vv debug); FLEX_LOG overrides'
complete -c flexsim -n "__fish_flexsim_using_subcommand sweep" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c flexsim -n "__fish_flexsim_using_subcommand fairness" -l trace -d 'Trace CSV with a `user` column' -r -F
complete -c flexsim -n "__fish_flexsim_using_subcommand fairness" -l model -r -f -a "fm\t'Flex-MIG: one job over many fixed leaves'
dm\t'Dynamic-MIG: one instance per job, reconfigured on demand'
sm\t'Static-MIG: one instance per job from a fixed layout'"
complete -c flexsim -n "__fish_flexsim_using_subcommand fairness" -l policy -d 'fifo, backfill (EASY) or conservative, optionally with a queue order' -r
complete -c flexsim -n "__fish_flexsim_using_subcommand fairness" -l weight-fairshare -d 'Fair-share weight (flexd.toml\'s priority.weight_fairshare)' -r
complete -c flexsim -n "__fish_flexsim_using_subcommand fairness" -l weight-age -d 'Age weight (priority.weight_age; the age factor is whole after 7 days)' -r
complete -c flexsim -n "__fish_flexsim_using_subcommand fairness" -l half-life-s -d 'Usage half-life in seconds (fairshare.half_life)' -r
complete -c flexsim -n "__fish_flexsim_using_subcommand fairness" -l drain-s -d 'Seconds a Dynamic-MIG reconfiguration drains its GPU (the paper measured 100-120)' -r
complete -c flexsim -n "__fish_flexsim_using_subcommand fairness" -l config -d 'Execution-time model overrides (see etc/flexsim.toml)' -r -F
complete -c flexsim -n "__fish_flexsim_using_subcommand fairness" -l window -d 'Backfill candidates behind the head; 0 for the whole queue' -r
complete -c flexsim -n "__fish_flexsim_using_subcommand fairness" -l topology -d 'Topology: a file, or a shipped one (a100-40gb-x2, h100-80gb-x8)' -r
complete -c flexsim -n "__fish_flexsim_using_subcommand fairness" -l hosts -d 'Copies of the topology\'s host' -r
complete -c flexsim -n "__fish_flexsim_using_subcommand fairness" -l host-mem-gib -d 'Host memory (RAM) of each host in GiB, in place of the topology\'s memory_gib; 0 for no limit. Only a trace\'s host_mem column (or ReqMem) asks for host memory' -r
complete -c flexsim -n "__fish_flexsim_using_subcommand fairness" -l json -d 'Print JSON'
complete -c flexsim -n "__fish_flexsim_using_subcommand fairness" -s v -l verbose -d 'More log output (-v info, -vv debug); FLEX_LOG overrides'
complete -c flexsim -n "__fish_flexsim_using_subcommand fairness" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c flexsim -n "__fish_flexsim_using_subcommand help; and not __fish_seen_subcommand_from run gen compare sweep fairness help" -f -a "run" -d 'Replay one trace under one model and policy and print its metrics'
complete -c flexsim -n "__fish_flexsim_using_subcommand help; and not __fish_seen_subcommand_from run gen compare sweep fairness help" -f -a "gen" -d 'Write one of the paper\'s synthetic traces'
complete -c flexsim -n "__fish_flexsim_using_subcommand help; and not __fish_seen_subcommand_from run gen compare sweep fairness help" -f -a "compare" -d 'Run every model and policy over generated traces and compare them'
complete -c flexsim -n "__fish_flexsim_using_subcommand help; and not __fish_seen_subcommand_from run gen compare sweep fairness help" -f -a "sweep" -d 'Policies x models over many seeds, categories, kinds and trace shapes: one table'
complete -c flexsim -n "__fish_flexsim_using_subcommand help; and not __fish_seen_subcommand_from run gen compare sweep fairness help" -f -a "fairness" -d 'Replay a multi-user trace (its `user` column) in FIFO order and with flexd\'s fair share: each user\'s mean wait and slowdown, and Jain\'s index, side by side'
complete -c flexsim -n "__fish_flexsim_using_subcommand help; and not __fish_seen_subcommand_from run gen compare sweep fairness help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
