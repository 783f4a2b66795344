/*
 * producer.c: closing a producer (PROTOCOL.md 14) and freeing it.
 */
#include "producer.h"

#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zmq.h>

static bool nothing_held(framesrv_producer *p, void *arg)
{
    (void)arg;
    return !fsp_any_slot_held(p);
}

/* 14 steps 2 and 3: NAME.ctl, NAME.sock (and NAME.cuda, with its server); the pools only when no slot has holders (a
 * consumer still owed a frame may not have mapped the pool yet). */
static void remove_files(framesrv_producer *p)
{
    char path[PATH_MAX];
    if (fsi_path(path, sizeof path, p->dir, p->name, ".ctl") == FRAMESRV_OK) unlink(path);
    if (fsi_path(path, sizeof path, p->dir, p->name, ".sock") == FRAMESRV_OK) unlink(path);
    fsp_cuda_close(p);
    if (p->pool == NULL || fsp_any_slot_held(p)) return;
    fsp_unlink_pool(p, p->epoch);
    for (uint32_t k = 0; k < p->retired_count; k++) fsp_unlink_pool(p, p->retired_epoch[k]);
}

void framesrv_producer_close(framesrv_producer *p)
{
    if (p == NULL) return;
    if (fsi_forked_child(p->opener)) {   /* the parent's stream, files and threads stay as they are */
        fsp_close_forked(p);
        return;
    }
    char path[PATH_MAX];
    if (p->reserved != NULL) framesrv_producer_abandon(p, p->reserved);
    if (!p->ended) framesrv_producer_end(p, 0);
    /* Give consumers a moment to release the last frames, so the pool goes with the stream. */
    fsp_sleep_on_wake(p, fsi_deadline(2000), false, nothing_held, NULL);
    fsp_stop_watching(p);
    remove_files(p);
    fsp_frame_ready(p);   /* consumers asleep look again now, not at their next timeout */
    if (p->pub != NULL) zmq_close(p->pub);
    p->pub = NULL;
    if (p->zmq_context != NULL) zmq_ctx_term(p->zmq_context);
    p->zmq_context = NULL;
    /* 14 step 4: unlink NAME.lock while still holding it, then release it by closing. */
    if (p->lock_fd >= 0 && fsi_path(path, sizeof path, p->dir, p->name, ".lock") == FRAMESRV_OK) unlink(path);
    if (p->lock_fd >= 0) close(p->lock_fd);   /* the name is free for the next producer */
    p->lock_fd = -1;
    pthread_mutex_lock(&p->lock);
    p->closed = true;
    bool last = p->kept == 0;
    pthread_mutex_unlock(&p->lock);
    if (last) fsp_free(p);   /* else the last framesrv_frame_release of a kept frame does */
}

void fsp_free(framesrv_producer *p)
{
    fsp_stop_watching(p);
    if (p->pub != NULL) zmq_close(p->pub);
    if (p->zmq_context != NULL) zmq_ctx_term(p->zmq_context);
    if (p->pool != NULL) fsi_pool_unref(p->pool);
    fsp_cuda_free(p);   /* before the control segment it registered goes */
    if (p->ctl != NULL) munmap(p->ctl, p->ctl_size);
    if (p->lock_fd >= 0) close(p->lock_fd);
    pthread_mutex_destroy(&p->lock);
    free(p);
}
