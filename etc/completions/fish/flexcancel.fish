complete -c flexcancel -s s -l signal -d 'Send this signal (TERM, KILL, USR1, SIGUSR1, 10, ...) instead of cancelling' -r
complete -c flexcancel -s h -l help -d 'Print help'
complete -c flexcancel -s V -l version -d 'Print version'
