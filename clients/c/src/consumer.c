/*
 * consumer.c: the consumer's public lifecycle: open, reopen, close, stream_info, stats
 * and fd. Attaching is consumer_attach.c's; receiving frames is consumer_next.c's.
 */
#include "consumer.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>
#include <zmq.h>

/* What monitors show: the option's name, else the program's, at most 31 bytes. */
static void set_client_name(framesrv_consumer *c, const char *name)
{
    if (!name || !*name) name = program_invocation_short_name;
    if (!name || !*name) name = "c-consumer";
    size_t n = strnlen(name, sizeof c->client_name - 1);
    memcpy(c->client_name, name, n);
    c->client_name[n] = '\0';
}

static int check_options(const framesrv_consumer_options *o, int *mode)
{
    *mode = FS_MODE_LOSSLESS;
    if (o && o->poll_us > FSI_POLL_US_MAX)
        return fsi_fail(FRAMESRV_E_INVALID, "consumer poll_us %u: use 0..%u microseconds", o->poll_us, FSI_POLL_US_MAX);
    if (o && o->memory != FRAMESRV_MEMORY_HOST && o->memory != FRAMESRV_MEMORY_CUDA)
        return fsi_fail(FRAMESRV_E_INVALID, "consumer memory %d: use FRAMESRV_MEMORY_HOST (0) or FRAMESRV_MEMORY_CUDA (1)", o->memory);
    if (o && o->media != FRAMESRV_MEDIA_VIDEO && o->media != FRAMESRV_MEDIA_AUDIO)
        return fsi_fail(FRAMESRV_E_INVALID, "consumer media %d: use FRAMESRV_MEDIA_VIDEO (0) or FRAMESRV_MEDIA_AUDIO (1)", o->media);
    if (!o || o->mode == 0 || o->mode == FRAMESRV_LOSSLESS) return FRAMESRV_OK;
    if (o->mode == FRAMESRV_LIVE) {
        *mode = FS_MODE_LIVE;
        return FRAMESRV_OK;
    }
    return fsi_fail(FRAMESRV_E_INVALID, "consumer mode %d: use FRAMESRV_LIVE (1) or FRAMESRV_LOSSLESS (2)", (int)o->mode);
}

/* Everything but the attachment: the runtime directory and its inotify watch. */
static int consumer_new(framesrv_consumer **out, const char *name, const framesrv_consumer_options *options)
{
    int mode, status;
    if ((status = fsi_check_name(name)) != FRAMESRV_OK || (status = check_options(options, &mode)) != FRAMESRV_OK) return status;
    framesrv_consumer *c = calloc(1, sizeof *c);
    if (!c) return fsi_fail(FRAMESRV_E_NO_MEMORY, "out of memory opening a consumer of '%s'", name);
    pthread_mutex_init(&c->lock, NULL);
    c->opener = fsi_opener_pid();
    c->inotify_fd = -1;
    c->mode = mode;
    c->poll_us = options ? options->poll_us : 0;
    c->memory = options ? options->memory : FRAMESRV_MEMORY_HOST;
    c->media = options ? options->media : FRAMESRV_MEDIA_VIDEO;
    snprintf(c->stream, sizeof c->stream, "%s", name);
    set_client_name(c, options ? options->client_name : NULL);
    *out = c;
    if ((status = fsi_held_defaults(c)) != FRAMESRV_OK) return status;
    if ((status = fsi_runtime_dir(c->dir, sizeof c->dir, true)) != FRAMESRV_OK) return status;
    c->inotify_fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    if (c->inotify_fd >= 0 && inotify_add_watch(c->inotify_fd, c->dir, IN_CREATE | IN_MOVED_TO) < 0) {
        close(c->inotify_fd);
        c->inotify_fd = -1;   /* the attach wait falls back to bounded sleeps */
    }
    return FRAMESRV_OK;   /* the ZeroMQ context comes with the first attachment */
}

int framesrv_consumer_open(framesrv_consumer **out, const char *name, const framesrv_consumer_options *options)
{
    if (!out) return fsi_fail(FRAMESRV_E_INVALID, "framesrv_consumer_open: out is NULL");
    *out = NULL;
    framesrv_consumer *c = NULL;
    int status = consumer_new(&c, name, options);
    if (status == FRAMESRV_OK) status = fsi_consumer_attach(c, fsi_deadline(options ? options->attach_timeout_ms : -1));
    if (status != FRAMESRV_OK) {
        framesrv_consumer_close(c);
        return status;
    }
    *out = c;
    return FRAMESRV_OK;
}

int framesrv_consumer_reopen(framesrv_consumer *c, int timeout_ms)
{
    if (!c) return fsi_fail(FRAMESRV_E_INVALID, "framesrv_consumer_reopen: consumer is NULL");
    if (fsi_forked(c->opener)) return fsi_consumer_forked(c);
    if (c->att) fsi_attachment_retire(c, c->att);
    c->ended = 0;
    int status = fsi_consumer_attach(c, fsi_deadline(timeout_ms));
    if (status == FRAMESRV_OK) c->stats.restarts++;
    return status;
}

void framesrv_consumer_close(framesrv_consumer *c)
{
    if (!c) return;
    if (fsi_forked_child(c->opener)) {   /* the parent's entry, bits and frames stay as they are */
        fsi_consumer_close_forked(c);
        return;
    }
    while (c->held) framesrv_frame_release(c->held);
    if (c->att) fsi_attachment_retire(c, c->att);
    /* Nothing is held any more, so every retired attachment was finished by its last release. */
    if (c->zctx) zmq_ctx_term(c->zctx);
    if (c->inotify_fd >= 0) close(c->inotify_fd);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

int framesrv_consumer_stream_info(framesrv_consumer *c, framesrv_stream_info *info)
{
    if (!c || !info) return fsi_fail(FRAMESRV_E_INVALID, "framesrv_consumer_stream_info: NULL argument");
    if (fsi_forked(c->opener)) return fsi_consumer_forked(c);
    const fsi_attachment *a = c->att;
    if (!a) return fsi_fail(FRAMESRV_E_STATE, "consumer of '%s' is not attached: call framesrv_consumer_reopen", c->stream);
    memset(info, 0, sizeof *info);
    snprintf(info->name, sizeof info->name, "%s", c->stream);
    info->slot_count = a->slot_count;
    /* const fields, validated at attach (0/0 or both >= 1) */
    info->rate_num = (int64_t)a->ctl->rate_num;
    info->rate_den = (int64_t)a->ctl->rate_den;
    info->producer_pid = a->producer_pid;
    info->live_source = (a->ctl->flags & FS_CONTROL_LIVE_SOURCE) != 0;
    info->epoch = fs_load_u64(&a->ctl->epoch);
    info->memory = a->cuda ? FRAMESRV_MEMORY_CUDA : FRAMESRV_MEMORY_HOST;
    info->media = a->ctl->media == FS_MEDIA_AUDIO ? FRAMESRV_MEDIA_AUDIO : FRAMESRV_MEDIA_VIDEO;   /* const, validated */
    info->device_ordinal = a->cuda ? a->cuda->device.ordinal : -1;
    if (a->cuda) snprintf(info->device_uuid, sizeof info->device_uuid, "%s", a->cuda->device.uuid_text);
    info->device_read_only = a->pool && a->pool->device && a->pool->device->read_only;
    return FRAMESRV_OK;
}

int framesrv_consumer_stats_of(framesrv_consumer *c, framesrv_consumer_stats *stats)
{
    if (!c || !stats) return fsi_fail(FRAMESRV_E_INVALID, "framesrv_consumer_stats_of: NULL argument");
    if (fsi_forked(c->opener)) return fsi_consumer_forked(c);
    pthread_mutex_lock(&c->lock);
    *stats = c->stats;
    pthread_mutex_unlock(&c->lock);
    return FRAMESRV_OK;
}

int framesrv_consumer_fd(framesrv_consumer *c)
{
    if (!c) return fsi_fail(FRAMESRV_E_INVALID, "framesrv_consumer_fd: consumer is NULL"), -1;
    if (fsi_forked(c->opener)) return fsi_consumer_forked(c), -1;
    if (!c->att) return fsi_fail(FRAMESRV_E_STATE, "consumer of '%s' is not attached", c->stream), -1;
    if (!c->att->sock && fsi_connect_doorbell(c, c->att) != FRAMESRV_OK) return -1;   /* lazily: 1.6 */
    int fd = -1;
    size_t size = sizeof fd;
    if (zmq_getsockopt(c->att->sock, ZMQ_FD, &fd, &size) != 0)
        return fsi_fail(FRAMESRV_E_ZMQ, "ZeroMQ could not give the socket's descriptor: %s", zmq_strerror(zmq_errno())), -1;
    return fd;
}
