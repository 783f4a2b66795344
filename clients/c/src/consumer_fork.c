/*
 * consumer_fork.c: closing a consumer in a forked child (framesrv.h: FRAMESRV_E_FORKED). The
 * child's copy names the parent's entry, holder bits and frames, so the close frees the
 * child's memory and mappings and nothing else: no CLOSING, no release, no bit cleared; no
 * ZeroMQ call (its sockets belong to the parent's I/O threads, which the child does not have),
 * no CUDA call (a driver context does not survive a fork) and no lock (a thread of the parent
 * may have held one at the fork).
 */
#include "consumer.h"

#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

static void forget_attachment(fsi_attachment *a)
{
    if (a->producer_fd >= 0) close(a->producer_fd);
    fsi_pool_unref_forked(a->pool);
    free(a->cuda);   /* its context and registration are the parent's */
    if (a->ctl) munmap(a->ctl, a->ctl_size);
    free(a);
}

void fsi_consumer_close_forked(framesrv_consumer *c)
{
    for (framesrv_frame *f = c->held, *next; f; f = next) {
        next = f->next_held;
        fsi_pool_unref_forked(f->pool);
        free(f);
    }
    for (fsi_attachment *a = c->retired, *next; a; a = next) {
        next = a->next_retired;
        forget_attachment(a);
    }
    if (c->att) forget_attachment(c->att);
    if (c->inotify_fd >= 0) close(c->inotify_fd);
    free(c);   /* ZeroMQ's context and socket, if any, stay: the parent's I/O threads own them */
}
