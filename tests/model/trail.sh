#!/bin/sh
# trail.sh [spin -D flags...]: replays pan's trail (room.pml.trail, in the
# current directory with room.pml) as kvx events. Pass the run's variant and
# its bounds as -D flags (-DCHUNK_AT_OPEN -DMAXC=1 -DCRANKS=8 ...): spin's
# simulator does not run the init's c_code that reads SPIN_* at run time.
spin -t "$@" room.pml 2>&1 | sed -n 's/^ *MSC: //p; s/^ *\(VIOLATION.*\)/\1/p'
