#!/bin/sh
# exit_status.sh PROGRAM [ARG...]: runs the program, its output as it is, then prints
# "exit status N" with its exit status on a line of its own. For ctest tests of a refusal:
# their PASS_REGULAR_EXPRESSION holds the message and the status together, where WILL_FAIL
# passes on any nonzero exit (another error, a wrong message: `formats 1 --format e9m9
# --nosuch` passed it).
"$@"
echo "exit status $?"
