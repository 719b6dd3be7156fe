complete -c flexreport -s S -l starttime -d 'Start of the period' -r
complete -c flexreport -s E -l endtime -d 'End of the period' -r
complete -c flexreport -s u -l user -d 'Only these users\' jobs (comma-separated names or uids)' -r
complete -c flexreport -s A -l accounts -d 'Only these accounts\' jobs (comma-separated)' -r
complete -c flexreport -s s -l state -d 'Only jobs now in these states: names or codes (PD,R,CD,F,CA,TO,NF), comma-separated' -r
complete -c flexreport -l csv -d 'Print CSV (RFC 4180): one header, one row per line of every report asked'
complete -c flexreport -l json -d 'Print JSON'
complete -c flexreport -s n -l noheader -d 'Leave out the headers (tables and CSV)'
complete -c flexreport -s h -l help -d 'Print help (see more with \'--help\')'
complete -c flexreport -s V -l version -d 'Print version'
