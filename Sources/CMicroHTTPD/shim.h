#ifndef CMICROHTTPD_SHIM_H
#define CMICROHTTPD_SHIM_H
// libmicrohttpd as Swift sees it. microhttpd.h needs the types of sys/socket.h and stdarg.h first.
#include <stdarg.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <strings.h>
#include <microhttpd.h>

// MHD_start_daemon is variadic, which Swift cannot call: this fixed-argument wrapper starts a
// daemon on `address` with a thread per connection (polled by an internal thread), an accept
// policy, a connection limit, an idle timeout (seconds), a per-connection memory limit, a
// thread stack size, and callbacks at each request's completion and each connection's start
// and end.
static inline struct MHD_Daemon *fs_mhd_start(unsigned int flags, const struct sockaddr *address,
                                              MHD_AcceptPolicyCallback accept, MHD_AccessHandlerCallback handler,
                                              void *context, MHD_RequestCompletedCallback completed,
                                              MHD_NotifyConnectionCallback notify,
                                              unsigned int connection_limit, unsigned int timeout_seconds,
                                              size_t memory_limit, size_t stack_size) {
    return MHD_start_daemon(flags, 0, accept, context, handler, context,
                            MHD_OPTION_SOCK_ADDR, address,
                            MHD_OPTION_NOTIFY_COMPLETED, completed, context,
                            MHD_OPTION_NOTIFY_CONNECTION, notify, context,
                            MHD_OPTION_CONNECTION_LIMIT, connection_limit,
                            MHD_OPTION_CONNECTION_TIMEOUT, timeout_seconds,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, memory_limit,
                            MHD_OPTION_THREAD_STACK_SIZE, stack_size,
                            MHD_OPTION_END);
}

// MHD_get_connection_info is variadic too: a connection's socket and its client's address.
static inline int fs_mhd_connection_fd(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info ? info->connect_fd : -1;
}
static inline const struct sockaddr *fs_mhd_connection_address(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    return info ? info->client_addr : NULL;
}

// How many of a request's header fields are named `name` (case-insensitive): MHD's lookup
// returns only the first.
struct fs_mhd_header_count { const char *name; unsigned int count; };
static inline enum MHD_Result fs_mhd_count_header(void *context, enum MHD_ValueKind kind, const char *key, const char *value) {
    (void) kind;
    (void) value;
    struct fs_mhd_header_count *c = (struct fs_mhd_header_count *) context;
    if (key != NULL && strcasecmp(key, c->name) == 0) c->count++;
    return MHD_YES;
}
static inline unsigned int fs_mhd_header_count(struct MHD_Connection *connection, const char *name) {
    struct fs_mhd_header_count c = { name, 0 };
    MHD_get_connection_values(connection, MHD_HEADER_KIND, fs_mhd_count_header, &c);
    return c.count;
}

// MHD_SIZE_UNKNOWN and the reader's end markers are macros with casts, which Swift does not import.
static const uint64_t fs_mhd_size_unknown = MHD_SIZE_UNKNOWN;
static const ssize_t fs_mhd_end_of_stream = MHD_CONTENT_READER_END_OF_STREAM;
static const ssize_t fs_mhd_end_with_error = MHD_CONTENT_READER_END_WITH_ERROR;
// The daemon's flags (a flag enum, which Swift imports as closed cases that cannot be or-ed).
static const unsigned int fs_mhd_thread_per_connection =
    MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL;
static const unsigned int fs_mhd_ipv6 = MHD_USE_IPv6;
// A connection's start, as the connection callback is told (an enum case Swift imports under another name).
static const enum MHD_ConnectionNotificationCode fs_mhd_connection_started = MHD_CONNECTION_NOTIFY_STARTED;
// A response with a copy of `size` bytes.
static inline struct MHD_Response *fs_mhd_response_copy(size_t size, const void *bytes) {
    return MHD_create_response_from_buffer(size, (void *) bytes, MHD_RESPMEM_MUST_COPY);
}
// The port the daemon listens on (the one the kernel chose for port 0); 0 if unknown.
static inline uint16_t fs_mhd_bound_port(struct MHD_Daemon *daemon) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
    return info ? info->port : 0;
}
#endif
