/*
 * producer_fork.c: a producer in a forked child (framesrv.h: FRAMESRV_E_FORKED). The child's
 * copy names the parent's stream: its close frees the child's memory, mappings and
 * descriptors and nothing else. The stream is not ended, no file is removed, no thread is
 * stopped (the child has none of them), NAME.lock stays the parent's (a flock belongs to the
 * open file, which the parent's descriptor keeps), and no ZeroMQ call (the sockets belong to
 * the parent's I/O threads), no CUDA call (a driver context does not survive a fork) and no
 * lock (a thread of the parent may have held one at the fork) is made.
 */
#include "producer.h"

#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

static void forget_cuda(framesrv_producer *p)
{
    fsp_cuda *k = p->cuda;
    if (!k) return;
    if (k->listen_fd >= 0) close(k->listen_fd);
    if (k->stop_fd >= 0) close(k->stop_fd);   /* never written: it would stop the parent's server */
    for (uint32_t i = 0; i < k->export_count; i++) close(k->exports[i].fd);
    for (uint32_t i = 0; i < p->retired_count; i++) fsi_pool_unref_forked(p->retired_pool[i]);
    free(k);
    p->cuda = NULL;
}

/* The producer itself, once closed and no kept frame is left. */
static void free_when_done(framesrv_producer *p)
{
    if (__atomic_load_n(&p->closed, __ATOMIC_ACQUIRE) && __atomic_load_n(&p->kept, __ATOMIC_ACQUIRE) == 0) free(p);
}

void fsp_close_forked(framesrv_producer *p)
{
    if (p->reserved) {
        fsi_pool_unref_forked(p->reserved->pool);
        free(p->reserved);
        p->reserved = NULL;
    }
    if (p->lock_fd >= 0) close(p->lock_fd);
    for (uint32_t i = 0; i < FS_MAX_CONSUMERS; i++)
        if (p->watched_fd[i] >= 0) close(p->watched_fd[i]);
    forget_cuda(p);
    fsi_pool_unref_forked(p->pool);
    p->pool = NULL;
    if (p->ctl) munmap(p->ctl, p->ctl_size);
    p->ctl = NULL;
    __atomic_store_n(&p->closed, true, __ATOMIC_RELEASE);
    free_when_done(p);   /* else the last kept frame's release frees it */
}

void fsp_release_forked(framesrv_frame *frame)
{
    framesrv_producer *p = frame->producer;
    if (frame == p->reserved) return;   /* the parent's reservation: close frees it */
    fsi_pool_unref_forked(frame->pool);
    free(frame);
    __atomic_sub_fetch(&p->kept, 1, __ATOMIC_ACQ_REL);
    free_when_done(p);
}
