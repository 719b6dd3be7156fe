complete -c flexrun -s n -l ntasks -d 'Start only the first N ranks (default: one per leaf)' -r
complete -c flexrun -l grace -d 'Seconds the other ranks keep running after one fails, before they get SIGTERM' -r
complete -c flexrun -s l -l label -d 'Prefix each output line with "RANK: "'
complete -c flexrun -s h -l help -d 'Print help'
complete -c flexrun -s V -l version -d 'Print version'
