complete -c flexshare -s u -l users -d 'Only these users (comma-separated names); without, every account and user' -r
complete -c flexshare -s o -l format -d 'sshare\'s fields, comma-separated, each with an optional `%WIDTH`: Account, User, RawShares, NormShares, RawUsage, EffectvUsage, FairShare (e.g. `Account%256`)' -r
complete -c flexshare -s M -l clusters -r
complete -c flexshare -l json -d 'Print JSON'
complete -c flexshare -s h -l noheader -d 'Leave out the header line'
complete -c flexshare -s U -l Users -d 'Only users\' rows, each with its account (yours unless -u names others)'
complete -c flexshare -s P -l parsable2 -d '`|` between fields (sshare\'s -P), and after the last too with -p'
complete -c flexshare -s p -l parsable
complete -c flexshare -s a -l all -d 'Accepted for sshare\'s scripts: every user is shown already (`-a/--all`), the long listing adds nothing (`-l/--long`), this host\'s cluster (`-M`)'
complete -c flexshare -s l -l long
complete -c flexshare -l help -d 'Print help'
complete -c flexshare -s V -l version -d 'Print version'
