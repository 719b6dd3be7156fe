-J x --dependency=afterok:12_[3-5] --signal=B:USR1@60 --export=ALL,A=b -o out-%j-%3a.log
#!/bin/sh
true
