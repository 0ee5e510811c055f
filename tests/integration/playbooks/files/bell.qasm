OPENQASM 3.0;
include "stdgates.inc";
bit[2] meas;
rz(pi/2) $0;
sx $0;
rz(pi/2) $0;
cx $0, $1;
meas[0] = measure $0;
meas[1] = measure $1;
