#ifndef CZMQ_SHIM_H
#define CZMQ_SHIM_H
// libzmq as Swift sees it. Only what Swift cannot import directly is added here.
#include <zmq.h>
#endif
