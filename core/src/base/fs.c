/* fs.c - atomic whole-file writes, whole-file reads within a limit, lock files (see
 * clformer/fs.h). POSIX only: open, fsync, rename, flock. */
#include "clformer/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/fault_internal.h"
#include "clformer/fault.h"

/* Bytes read at a time from a file whose size stat() does not tell (a pipe). */
#define READ_STEP ((size_t)1 << 16)
/* A lock file whose inode changes under us (released and re-created by others between our
 * open and our flock) is retried this many times before giving up. */
#define LOCK_TRIES 8
/* Room for "process <pid> on host <name>" in the lock file and in the error message. */
#define HOLDER_MAX 320

/* ---- atomic write ---- */

/* fsyncs the directory holding path, so that the rename survives a power loss. A directory
 * that cannot be opened for reading, or a file system that cannot sync directories
 * (EINVAL), loses nothing that a sync could have kept: both are let pass. */
static clf_status sync_parent_dir(const char *path)
{
    clf_status st = CLF_OK;
    char *dir = strdup(path);
    if (!dir)
        return clf_error(CLF_ERR_NOMEM, "%s: out of memory", path);
    char *slash = strrchr(dir, '/');
    const char *d = ".";
    if (slash) {
        slash[slash == dir ? 1 : 0] = '\0'; /* "/x" -> "/", "a/b/x" -> "a/b" */
        d = dir;
    }
    int fd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        if (fsync(fd) != 0 && errno != EINVAL)
            st = clf_error(CLF_ERR_IO, "%s: written, but cannot sync its directory %s: %s", path, d,
                           strerror(errno));
        close(fd);
    }
    free(dir);
    return st;
}

/* Sleeps for CLF_FAULT's write_slow:<ms>, if any (clformer/fault.h). */
static void fault_pause(void)
{
    unsigned ms = clf_fault_write_pause_ms();
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (ms && nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

clf_status clf_fs_write_atomic(const char *path, clf_fs_write_fn fn, void *ctx)
{
    clf_status st = CLF_OK;
    size_t tlen = strlen(path) + 32;
    char *tmp = malloc(tlen);
    FILE *f = NULL;
    int fd = -1, saved;
    if (!tmp)
        return clf_error(CLF_ERR_NOMEM, "%s: out of memory", path);
    snprintf(tmp, tlen, "%s.tmp.%ld", path, (long)getpid());
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) {
        st = clf_error(CLF_ERR_IO, "%s: cannot create %s: %s", path, tmp, strerror(errno));
        free(tmp);
        return st; /* nothing created: nothing to remove */
    }
    if (!(f = fdopen(fd, "wb"))) {
        st = clf_error(CLF_ERR_NOMEM, "%s: out of memory opening %s", path, tmp);
        goto fail;
    }
    fd = -1; /* f owns it now */
    errno = 0;
    if ((st = fn(f, ctx)) != CLF_OK)
        goto fail;
    /* errno is still that of the failed call when fn went on after a stdio error */
    saved = ferror(f) ? (errno ? errno : EIO) : 0;
    if (!saved && clf_fault_hit(CLF_FAULT_WRITE))
        saved = ENOSPC; /* CLF_FAULT=write:N: as if the disk were full */
    if (!saved && fflush(f) != 0)
        saved = errno;
    if (!saved)
        fault_pause(); /* CLF_FAULT=write_slow:<ms>: a kill test's window */
    if (!saved && fsync(fileno(f)) != 0)
        saved = errno;
    if (fclose(f) != 0 && !saved)
        saved = errno;
    f = NULL;
    if (saved) {
        st = clf_error(CLF_ERR_IO, "%s: cannot write %s: %s", path, tmp, strerror(saved));
        goto fail;
    }
    if (rename(tmp, path) != 0) {
        st = clf_error(CLF_ERR_IO, "%s: cannot rename %s to it: %s", path, tmp, strerror(errno));
        goto fail;
    }
    free(tmp);
    return sync_parent_dir(path);
fail:
    if (f)
        fclose(f);
    if (fd >= 0)
        close(fd);
    unlink(tmp);
    free(tmp);
    return st;
}

typedef struct byte_span {
    const void *data;
    size_t n;
} byte_span;

static clf_status write_span(FILE *f, void *ctx)
{
    const byte_span *s = ctx;
    if (s->n)
        fwrite(s->data, 1, s->n, f);
    return CLF_OK;
}

clf_status clf_fs_write_atomic_bytes(const char *path, const void *data, size_t n)
{
    byte_span s = {data, n};
    return clf_fs_write_atomic(path, write_span, &s);
}

clf_status clf_fs_link_atomic(const char *target, const char *path)
{
    clf_status st = CLF_OK;
    size_t tlen = strlen(path) + 32;
    char *tmp = malloc(tlen);
    if (!tmp)
        return clf_error(CLF_ERR_NOMEM, "%s: out of memory", path);
    snprintf(tmp, tlen, "%s.tmp.%ld", path, (long)getpid());
    unlink(tmp); /* a leftover of a killed process of our pid */
    if (link(target, tmp) != 0) {
        st = clf_error(CLF_ERR_IO, "%s: cannot link %s as %s: %s", path, target, tmp,
                       strerror(errno));
        free(tmp);
        return st; /* nothing created */
    }
    if (rename(tmp, path) != 0) {
        st = clf_error(CLF_ERR_IO, "%s: cannot rename %s to it: %s", path, tmp, strerror(errno));
        unlink(tmp);
        free(tmp);
        return st;
    }
    /* when path already was target, rename() keeps both names: drop the temporary one */
    unlink(tmp);
    free(tmp);
    return sync_parent_dir(path);
}

/* ---- whole-file read ---- */

clf_status clf_fs_read_all(const char *path, size_t max_len, char **data, size_t *len)
{
    clf_status st = CLF_OK;
    struct stat sb;
    char *buf = NULL;
    size_t cap = READ_STEP, n = 0;
    *data = NULL;
    *len = 0;
    if (max_len > SIZE_MAX / 2) /* so that max_len + READ_STEP + 1 cannot overflow */
        max_len = SIZE_MAX / 2;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return clf_error(CLF_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (fstat(fd, &sb) != 0 || S_ISDIR(sb.st_mode)) {
        st = clf_error(CLF_ERR_IO, "%s: cannot read: %s", path,
                       strerror(S_ISDIR(sb.st_mode) ? EISDIR : errno));
        goto fail;
    }
    /* a regular file's size is known before reading (it is checked again as it is read, in
     * case the file grows); a pipe is read in steps */
    if (S_ISREG(sb.st_mode)) {
        if ((unsigned long long)sb.st_size > max_len) {
            st = clf_error(CLF_ERR_INPUT, "%s: %lld bytes, more than the limit of %zu", path,
                           (long long)sb.st_size, max_len);
            goto fail;
        }
        cap = (size_t)sb.st_size;
    }
    if (!(buf = malloc(cap + 1))) {
        st = clf_error(CLF_ERR_NOMEM, "%s: out of memory reading %zu bytes", path, cap);
        goto fail;
    }
    for (;;) {
        if (n == cap) { /* full: room for one more step, to see the end or more bytes */
            size_t want = cap + READ_STEP;
            char *grown = realloc(buf, want + 1);
            if (!grown) {
                st = clf_error(CLF_ERR_NOMEM, "%s: out of memory reading %zu bytes", path, want);
                goto fail;
            }
            buf = grown;
            cap = want;
        }
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            st = clf_error(CLF_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
            goto fail;
        }
        if (r == 0)
            break;
        n += (size_t)r;
        if (n > max_len) {
            st = clf_error(CLF_ERR_INPUT, "%s: more than the limit of %zu bytes", path, max_len);
            goto fail;
        }
    }
    close(fd);
    buf[n] = '\0';
    *data = buf;
    *len = n;
    return CLF_OK;
fail:
    close(fd);
    free(buf);
    return st;
}

/* ---- lock files ---- */

struct clf_fs_lock {
    int fd;
    char *path;
};

/* "locked by <what the holder wrote>", or by an unnamed holder when the file is empty (it
 * is between its open and its write) or unreadable. */
static clf_status refuse_locked(const char *path, int fd)
{
    char holder[HOLDER_MAX];
    ssize_t r = pread(fd, holder, sizeof holder - 1, 0);
    size_t n = r > 0 ? (size_t)r : 0;
    while (n > 0 && (holder[n - 1] == '\n' || holder[n - 1] == '\0'))
        n--;
    holder[n] = '\0';
    for (size_t i = 0; i < n; i++) /* keep the message one line */
        if (holder[i] == '\n' || holder[i] == '\r')
            holder[i] = ' ';
    return clf_error(CLF_ERR_IO, "%s: locked by %s", path, n ? holder : "another process");
}

clf_status clf_fs_lock_acquire(const char *path, clf_fs_lock **out)
{
    clf_status st = CLF_OK;
    clf_fs_lock *lock = NULL;
    int fd = -1;
    *out = NULL;
    for (int attempt = 0;; attempt++) {
        struct stat held, named;
        fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
        if (fd < 0)
            return clf_error(CLF_ERR_IO, "%s: cannot create the lock file: %s", path,
                             strerror(errno));
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            st = errno == EWOULDBLOCK
                     ? refuse_locked(path, fd)
                     : clf_error(CLF_ERR_IO, "%s: cannot lock: %s", path, strerror(errno));
            goto fail;
        }
        /* the holder before us may have removed the file between our open and our flock:
         * the lock counts only on the file that is still at path */
        if (fstat(fd, &held) == 0 && stat(path, &named) == 0 && held.st_dev == named.st_dev &&
            held.st_ino == named.st_ino)
            break;
        close(fd);
        fd = -1;
        if (attempt + 1 == LOCK_TRIES)
            return clf_error(CLF_ERR_IO, "%s: cannot lock: the file keeps being replaced", path);
    }
    char host[256] = "", holder[HOLDER_MAX];
    if (gethostname(host, sizeof host - 1) != 0)
        snprintf(host, sizeof host, "unknown");
    int hn = snprintf(holder, sizeof holder, "process %ld on host %s\n", (long)getpid(), host);
    if (ftruncate(fd, 0) != 0 || pwrite(fd, holder, (size_t)hn, 0) != hn) {
        st = clf_error(CLF_ERR_IO, "%s: cannot write the lock file: %s", path, strerror(errno));
        goto fail_unlink;
    }
    if (!(lock = malloc(sizeof *lock)) || !(lock->path = strdup(path))) {
        free(lock);
        st = clf_error(CLF_ERR_NOMEM, "%s: out of memory", path);
        goto fail_unlink;
    }
    lock->fd = fd;
    *out = lock;
    return CLF_OK;
fail_unlink:
    unlink(path); /* ours: we hold it */
fail:
    close(fd);
    return st;
}

void clf_fs_lock_release(clf_fs_lock *lock)
{
    if (!lock)
        return;
    /* unlinked while still held, so that nobody locks the old file after us; a process that
     * opened it before the unlink sees at its fstat/stat check that it is gone */
    unlink(lock->path);
    close(lock->fd);
    free(lock->path);
    free(lock);
}
