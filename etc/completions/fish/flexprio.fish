complete -c flexprio -s u -l user -d 'Only these users\' jobs (comma-separated names or uids)' -r
complete -c flexprio -s j -l jobs -d 'Only these jobs (comma-separated ids)' -r
complete -c flexprio -s w -l weights -d 'Print the weights instead of the jobs (sprio -w)'
complete -c flexprio -l json -d 'Print JSON: the weights and every selected job\'s row'
complete -c flexprio -s h -l noheader -d 'Leave out the header line'
complete -c flexprio -l help -d 'Print help'
complete -c flexprio -s V -l version -d 'Print version'
