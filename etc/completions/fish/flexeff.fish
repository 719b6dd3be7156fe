complete -c flexeff -l json -d 'Print the report as JSON'
complete -c flexeff -s h -l help -d 'Print help (see more with \'--help\')'
complete -c flexeff -s V -l version -d 'Print version'
