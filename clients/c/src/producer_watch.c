/*
 * producer_watch.c: the producer's background thread. It sleeps on `attach_seq` (bounded),
 * admits new consumers (PROTOCOL.md 12.1, 9.1), polls the pidfds of admitted ones (12.5)
 * and reclaims consumers that detached, died, or died half-registered (12.4, 15.4).
 */
#include "producer.h"

#include <poll.h>
#include <unistd.h>

/* 12.4: no more reservations for entry i, every hold cleared, the entry freed if it still
 * belongs to `pid`. A detach (CLOSING) is not counted as a death. */
static void reclaim(framesrv_producer *p, uint32_t i, pid_t pid)
{
    fs_consumer *e = &p->consumers[i];
    uint64_t bit = 1ull << i;
    bool died = fs_load_u32(&e->state) != FS_CONSUMER_CLOSING;
    pthread_mutex_lock(&p->lock);
    bool quarantine = fsp_cuda_reclaim(p, i, pid, died);   /* 4.5 step 3: before the holder bits go */
    p->lossless_mask &= ~bit;
    fs_store_u64(&p->ctl->lossless_mask, p->lossless_mask);
    for (uint32_t s = 0; s < p->slot_count; s++) fs_slot_clear_holder(&p->slots[s], bit);
    fs_consumer_wait_end(p->ctl, bit);   /* its sleepers bit: one it died with would cost every publish a wake */
    if (p->watched_fd[i] >= 0) {
        close(p->watched_fd[i]);
        p->watched_fd[i] = -1;
        p->consumers_now--;
    }
    if (fs_load_i32(&e->pid) == pid) {
        e->first_seq = 0;
        e->held = 0;
        e->hold_since_ns = 0;
        /* SYNC: release, the next claimer sees the entry reset. A quarantined entry is freed
         * once its slots are reserved again (fsp_cuda_slot_retaken). */
        if (!quarantine) fs_consumer_free(e);
    }
    if (died) p->reclaimed++;
    pthread_mutex_unlock(&p->lock);
    if (died) fs_count(&p->ctl->reclaimed, 1);
    fsp_wake(p);
}

/* An ACTIVE entry not watched yet: watch its pidfd and, lossless, admit it (9.1).
 * Returns whether anything changed. */
static bool admit(framesrv_producer *p, uint32_t i, pid_t pid)
{
    fs_consumer *e = &p->consumers[i];
    uint64_t start = e->start_time;   /* written before ACTIVE, read after its acquire load */
    int fd = fsi_open_pidfd(pid, start);
    if (fd < 0 || !fsi_pidfd_alive(fd)) {
        if (fd >= 0) close(fd);
        if (fd >= 0 || fsi_process_start_time(pid) != start) {   /* it died */
            reclaim(p, i, pid);
            return true;
        }
        return false;   /* cannot watch it now (no descriptors?): try again at the next scan */
    }
    bool lossless = fs_load_u32(&e->mode) == FS_MODE_LOSSLESS;   /* anything else is served live */
    pthread_mutex_lock(&p->lock);
    p->watched_fd[i] = fd;
    p->watched_pid[i] = pid;
    p->consumers_now++;
    if (lossless) {
        fs_store_u64(&e->first_seq, p->next_seq);   /* SYNC: before any frame carrying the bit */
        p->lossless_mask |= 1ull << i;
        fs_store_u64(&p->ctl->lossless_mask, p->lossless_mask);
    }
    pthread_mutex_unlock(&p->lock);
    if (lossless) fsp_frame_ready(p);   /* it may sleep on frame_wake for its admission */
    return true;
}

/* 12.1: one pass over the consumer table. Returns whether anything changed. */
static bool scan(framesrv_producer *p)
{
    bool changed = false;
    for (uint32_t i = 0; i < FS_MAX_CONSUMERS; i++) {
        fs_consumer *e = &p->consumers[i];
        pid_t pid = fs_load_i32(&e->pid);
        if (pid == 0 || fsp_cuda_quarantined(p, i)) continue;
        uint32_t state = fs_load_u32(&e->state);
        bool watched = p->watched_fd[i] >= 0;
        if (state == FS_CONSUMER_ACTIVE && !watched) {
            changed |= admit(p, i, pid);
        } else if (state == FS_CONSUMER_CLOSING) {
            reclaim(p, i, pid);
            changed = true;
        } else if ((state == FS_CONSUMER_FREE || state == FS_CONSUMER_CLAIMED) && !watched &&
                   fsi_process_start_time(pid) == 0) {
            reclaim(p, i, pid);   /* died between its CAS and ACTIVE */
            changed = true;
        }   /* any other state is a bad entry: left alone */
    }
    return changed;
}

/* 12.5: reclaims every watched consumer whose pidfd is readable (it exited). */
static void reap(framesrv_producer *p)
{
    struct pollfd fds[FS_MAX_CONSUMERS];
    uint32_t index[FS_MAX_CONSUMERS], n = 0;
    for (uint32_t i = 0; i < FS_MAX_CONSUMERS; i++) {
        if (p->watched_fd[i] < 0) continue;
        fds[n] = (struct pollfd){.fd = p->watched_fd[i], .events = POLLIN};
        index[n++] = i;
    }
    if (n == 0 || poll(fds, n, 0) <= 0) return;
    for (uint32_t k = 0; k < n; k++)
        if (fds[k].revents != 0) reclaim(p, index[k], p->watched_pid[index[k]]);
}

void *fsp_watch_main(void *producer)
{
    framesrv_producer *p = producer;
    for (;;) {
        /* Read the word before `running`: close clears `running`, then bumps the word. */
        uint32_t seen = fs_load_u32(&p->ctl->attach_seq);
        pthread_mutex_lock(&p->lock);
        bool running = p->running;
        pthread_mutex_unlock(&p->lock);
        if (!running) return NULL;
        if (scan(p)) fsp_wake(p);
        reap(p);
        pthread_mutex_lock(&p->lock);
        bool watching = p->consumers_now > 0;
        pthread_mutex_unlock(&p->lock);
        fsi_futex_wait(&p->ctl->attach_seq, seen, watching ? FSP_WATCH_POLL_MS : FSP_LONGEST_WAIT_MS);
    }
}

void fsp_stop_watching(framesrv_producer *p)
{
    if (p->thread_started) {
        pthread_mutex_lock(&p->lock);
        p->running = false;
        pthread_mutex_unlock(&p->lock);
        fs_bump(&p->ctl->attach_seq);
        fsi_futex_wake(&p->ctl->attach_seq);
        pthread_join(p->thread, NULL);
        p->thread_started = false;
    }
    for (uint32_t i = 0; i < FS_MAX_CONSUMERS; i++)
        if (p->watched_fd[i] >= 0) {
            close(p->watched_fd[i]);
            p->watched_fd[i] = -1;
        }
}
