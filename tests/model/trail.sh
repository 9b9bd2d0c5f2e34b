#!/bin/sh
# trail.sh [spin -D flags...]: replays pan's trail as kvx events.
spin -t "$@" room.pml 2>&1 | sed -n 's/^ *MSC: //p; s/^ *\(VIOLATION.*\)/\1/p'
