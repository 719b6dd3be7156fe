complete -c flexshare -s u -l users -d 'Only these users (comma-separated names); without, every account and user' -r
complete -c flexshare -l json -d 'Print JSON'
complete -c flexshare -s h -l noheader -d 'Leave out the header line'
complete -c flexshare -l help -d 'Print help'
complete -c flexshare -s V -l version -d 'Print version'
