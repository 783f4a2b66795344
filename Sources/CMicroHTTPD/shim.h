#ifndef CMICROHTTPD_SHIM_H
#define CMICROHTTPD_SHIM_H
// libmicrohttpd as Swift sees it. microhttpd.h needs the types of sys/socket.h and stdarg.h first.
#include <stdarg.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <microhttpd.h>
#endif
