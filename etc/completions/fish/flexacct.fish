complete -c flexacct -s S -l starttime -d 'Start of the period [default: today 00:00; with --jobs and no period: the epoch]' -r
complete -c flexacct -s E -l endtime -d 'End of the period [default: now]' -r
complete -c flexacct -s u -l user -d 'Only these users\' jobs (comma-separated names or uids)' -r
complete -c flexacct -s A -l accounts -d 'Only these accounts\' jobs (comma-separated)' -r
complete -c flexacct -s s -l state -d 'Only jobs now in these states: names or codes (PD,R,CD,F,CA,TO,NF), comma-separated' -r
complete -c flexacct -s j -l jobs -d 'Only these jobs (comma-separated ids)' -r
complete -c flexacct -s o -l format -d 'Fields to show, comma-separated, each optionally with `%WIDTH` (`%-WIDTH` aligns left); see --helpformat' -r
complete -c flexacct -l delimiter -d 'The separator of --parsable2 (implies it)' -r
complete -c flexacct -l name -d 'Only jobs with these names (comma-separated)' -r
complete -c flexacct -l units -d 'sacct\'s `--units`: accepted; sizes are shown as flexacct shows them' -r
complete -c flexacct -s M -l clusters -d 'Only these clusters (sacct\'s -M): this host\'s cluster, `flex`, or `all`' -r
complete -c flexacct -s e -l helpformat -d 'Print the field names --format takes, and exit'
complete -c flexacct -s P -l parsable2 -d 'Separate fields with `|` (or --delimiter), no padding, no trailing delimiter'
complete -c flexacct -l csv -d 'Print CSV (RFC 4180) with a header line'
complete -c flexacct -l json -d 'Print the selected jobs\' full records as a JSON array (--format does not apply)'
complete -c flexacct -s n -l noheader -d 'Leave out the header'
complete -c flexacct -s a -l allusers -d 'Every user\'s jobs (root; other users always see only their own)'
complete -c flexacct -s X -l allocations -d 'Only the jobs\' allocations, not their steps (sacct\'s -X): accepted for scripts; Flex keeps no steps, so every row is a job\'s allocation already'
complete -c flexacct -s h -l help -d 'Print help (see more with \'--help\')'
complete -c flexacct -s V -l version -d 'Print version'
