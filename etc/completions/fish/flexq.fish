complete -c flexq -s u -l user -d 'Only these users\' jobs (comma-separated names)' -r
complete -c flexq -s t -l states -d 'Only jobs in these states: names or squeue codes (PD,R,CD,F,CA,TO,NF,OOM), or "all"' -r
complete -c flexq -s j -l jobs -d 'Only these jobs (comma-separated ids; an array\'s id names all its tasks)' -r
complete -c flexq -s n -l name -d 'Only jobs with these names (comma-separated)' -r
complete -c flexq -s o -l format -d 'squeue\'s format: `%[.][size]type` fields, e.g. "%.18i %.8j %.2t %.10M %R" (see docs/commands.md for the fields)' -r
complete -c flexq -s O -l Format -d 'squeue\'s long format: comma-separated `name[:[.][size]]`, e.g. "JobID,Name:30,State"' -r
complete -c flexq -s p -l partition -d 'Only jobs in these partitions (squeue\'s -p): a Flex host\'s one partition is `flex`' -r
complete -c flexq -s M -l clusters -d 'Only these clusters (squeue\'s -M): this host\'s cluster, `flex`, or `all`' -r
complete -c flexq -s r -l array -d 'Every task of an array on its own row (by default an array\'s pending tasks share one row, `12_[4-15%2]`, as in squeue)'
complete -c flexq -l me -d 'Only your own jobs'
complete -c flexq -s l -l long -d 'squeue\'s long listing (STATE in full, TIME_LIMIT)'
complete -c flexq -l start -d 'Pending jobs with their expected start times'
complete -c flexq -l json -d 'Print JSON (an array of jobs, or of hosts with --leaves)'
complete -c flexq -s h -l noheader -d 'Leave out the header line'
complete -c flexq -l leaves -d 'Show every leaf of the host: its GPU, profile, free share and the job holding it'
complete -c flexq -s a -l all -d 'Accepted for squeue\'s scripts: every partition is shown already (`-a/--all`), sizes are not converted (`--noconvert`), and only the state is needed (`--only-job-state`)'
complete -c flexq -l noconvert
complete -c flexq -l only-job-state
complete -c flexq -l help -d 'Print help'
complete -c flexq -s V -l version -d 'Print version'
