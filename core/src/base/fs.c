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

/* Bytes read at a time beyond the size stat() told (a file that grows as it is read). */
#define READ_STEP ((size_t)1 << 16)
/* A lock file whose inode changes under us (released and re-created by others between our
 * open and our flock) is retried this many times before giving up. */
#define LOCK_TRIES 8
/* Room for "process <pid> on host <name>" in the lock file and in the error message. */
#define HOLDER_MAX 320

/* ---- what a path is ---- */

/* "a FIFO", "a character device", ... for a file that is not regular. */
static const char *kind_of(mode_t mode)
{
    if (S_ISFIFO(mode))
        return "a FIFO";
    if (S_ISCHR(mode))
        return "a character device";
    if (S_ISBLK(mode))
        return "a block device";
    if (S_ISSOCK(mode))
        return "a socket";
    if (S_ISLNK(mode))
        return "a symbolic link";
    return "not a regular file";
}

/* The refusal of a path that is not a regular file, to be read (reading) or replaced: a
 * directory as the system says it (EISDIR), anything else as input that cannot be used. */
static clf_status refuse_kind(const char *path, mode_t mode, int reading)
{
    if (S_ISDIR(mode))
        return clf_error(CLF_ERR_IO, "%s: cannot %s: %s", path, reading ? "read" : "write",
                         strerror(EISDIR));
    return clf_error(CLF_ERR_INPUT, "%s: not a regular file (%s): not %s", path, kind_of(mode),
                     reading ? "read" : "replaced");
}

/* An output path resolved: name is the file to replace (path itself, or the regular file a
 * symbolic link at path leads to, malloc'd); when it exists, old is its stat. */
typedef struct out_file {
    char *name;
    int exists;
    struct stat old;
} out_file;

/* Resolves path as clf_fs_write_atomic replaces it (clformer/fs.h). A path that cannot be
 * looked at (a missing directory, no permission) is left for the creation to report. */
static clf_status resolve_output(const char *path, out_file *o)
{
    struct stat lsb;
    o->name = NULL;
    o->exists = 0;
    int found = lstat(path, &lsb) == 0;
    if (found && S_ISLNK(lsb.st_mode)) {
        if (stat(path, &o->old) != 0)
            return clf_error(CLF_ERR_INPUT,
                             "%s: a symbolic link that leads nowhere (%s): not written through",
                             path, strerror(errno));
        if (!S_ISREG(o->old.st_mode))
            return refuse_kind(path, o->old.st_mode, 0);
        if (!(o->name = realpath(path, NULL)))
            return clf_error(CLF_ERR_IO, "%s: cannot follow the symbolic link: %s", path,
                             strerror(errno));
        o->exists = 1;
        return CLF_OK;
    }
    if (found) {
        if (!S_ISREG(lsb.st_mode))
            return refuse_kind(path, lsb.st_mode, 0);
        o->old = lsb;
        o->exists = 1;
    }
    if (!(o->name = strdup(path)))
        return clf_error(CLF_ERR_NOMEM, "%s: out of memory", path);
    return CLF_OK;
}

clf_status clf_fs_check_output(const char *path)
{
    out_file o;
    clf_status st = resolve_output(path, &o);
    free(o.name);
    return st;
}

/* Renames tmp over o->name, the output path resolved by resolve_output, after looking at
 * it again (lstat): what was checked before the temporary file was written may have been
 * replaced since. A name that is now anything but a regular file or nothing (a FIFO, a
 * device, a directory, a symbolic link put there) is refused and left as it is. A name
 * that was free is taken with RENAME_NOREPLACE where the file system has it, so that
 * nothing put there after this look is replaced either; a regular file that appeared
 * (another writer's) is replaced, as rename() would. What remains open is the moment
 * between this look and the rename() over an existing file (clformer/fs.h). */
static clf_status rename_checked(const char *path, const char *tmp, const out_file *o)
{
    struct stat now;
    int found = lstat(o->name, &now) == 0;
    if (found && !S_ISREG(now.st_mode))
        return clf_error(CLF_ERR_INPUT,
                         "%s: became %s while it was being written: not replaced (the new "
                         "content was not kept)",
                         path, S_ISDIR(now.st_mode) ? "a directory" : kind_of(now.st_mode));
    if (!found) {
        if (renameat2(AT_FDCWD, tmp, AT_FDCWD, o->name, RENAME_NOREPLACE) == 0)
            return CLF_OK;
        if (errno == EEXIST) /* something came since the look: look again */
            return rename_checked(path, tmp, &(out_file){.name = o->name, .exists = 1});
        if (errno != EINVAL && errno != ENOSYS) /* else: no RENAME_NOREPLACE here */
            return clf_error(CLF_ERR_IO, "%s: cannot rename %s to it: %s", path, tmp,
                             strerror(errno));
    }
    if (rename(tmp, o->name) != 0)
        return clf_error(CLF_ERR_IO, "%s: cannot rename %s to it: %s", path, tmp, strerror(errno));
    return CLF_OK;
}

/* "<name>.tmp.<pid>" (malloc'd), or NULL when out of memory. */
static char *temp_name(const char *name)
{
    size_t tlen = strlen(name) + 32;
    char *tmp = malloc(tlen);
    if (tmp)
        snprintf(tmp, tlen, "%s.tmp.%ld", name, (long)getpid());
    return tmp;
}

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

/* Creates the temporary file tmp for o into *fd (a leftover of a killed process of our
 * pid, or anything else under that name, is removed first: the file made is new, never a
 * link or FIFO found there), with the permission bits, and for root the owner, of the file
 * it replaces. On failure nothing is left under tmp. */
static clf_status create_temp(const char *path, const char *tmp, const out_file *o, int *fd)
{
    unlink(tmp);
    *fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (*fd < 0)
        return clf_error(CLF_ERR_IO, "%s: cannot create %s: %s", path, tmp, strerror(errno));
    if (!o->exists)
        return CLF_OK;
    /* The owner, for root, as far as it can be given (an owner a user namespace does not
     * map stays root's: the write goes on). Only the rwx bits are kept: a set-id bit on a
     * file whose owner may not have followed would hand out the writer's rights. */
    if (geteuid() == 0)
        (void)!fchown(*fd, o->old.st_uid, o->old.st_gid);
    if (fchmod(*fd, o->old.st_mode & 0777) != 0) {
        clf_status st = clf_error(CLF_ERR_IO, "%s: cannot give %s the mode of %s: %s", path, tmp,
                                  o->name, strerror(errno));
        close(*fd);
        *fd = -1;
        unlink(tmp);
        return st;
    }
    return CLF_OK;
}

clf_status clf_fs_write_atomic(const char *path, clf_fs_write_fn fn, void *ctx)
{
    clf_status st = CLF_OK;
    out_file o;
    char *tmp = NULL;
    FILE *f = NULL;
    int fd = -1, saved;
    if ((st = resolve_output(path, &o)) != CLF_OK) {
        free(o.name);
        return st; /* nothing created */
    }
    if (!(tmp = temp_name(o.name))) {
        free(o.name);
        return clf_error(CLF_ERR_NOMEM, "%s: out of memory", path);
    }
    if ((st = create_temp(path, tmp, &o, &fd)) != CLF_OK) {
        free(o.name);
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
    if ((st = rename_checked(path, tmp, &o)) != CLF_OK)
        goto fail;
    st = sync_parent_dir(o.name);
    free(tmp);
    free(o.name);
    return st;
fail:
    if (f)
        fclose(f);
    if (fd >= 0)
        close(fd);
    unlink(tmp);
    free(tmp);
    free(o.name);
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
    out_file o;
    char *tmp = NULL;
    if ((st = resolve_output(path, &o)) != CLF_OK)
        goto done;
    if (!(tmp = temp_name(o.name))) {
        st = clf_error(CLF_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    unlink(tmp); /* a leftover of a killed process of our pid */
    if (link(target, tmp) != 0) {
        st = clf_error(CLF_ERR_IO, "%s: cannot link %s as %s: %s", path, target, tmp,
                       strerror(errno));
        goto done; /* nothing created */
    }
    st = rename_checked(path, tmp, &o);
    /* when path already was target, rename() keeps both names: drop the temporary one */
    unlink(tmp);
    if (st == CLF_OK)
        st = sync_parent_dir(o.name);
done:
    free(tmp);
    free(o.name);
    return st;
}

/* ---- whole-file read ---- */

clf_status clf_fs_open_regular(const char *path, uint64_t max_len, int *fd, uint64_t *size)
{
    clf_status st = CLF_OK;
    struct stat sb;
    *fd = -1;
    *size = 0;
    /* the type first: opening a device can block or act (a tape rewinds, a tty) */
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode))
        return refuse_kind(path, sb.st_mode, 1);
    int f = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (f < 0)
        return clf_error(CLF_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    int flags = fcntl(f, F_GETFL);
    if (fstat(f, &sb) != 0 || flags < 0 || fcntl(f, F_SETFL, flags & ~O_NONBLOCK) != 0) {
        st = clf_error(CLF_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
        goto fail;
    }
    if (!S_ISREG(sb.st_mode)) { /* path was replaced since the stat above */
        st = refuse_kind(path, sb.st_mode, 1);
        goto fail;
    }
    if ((uint64_t)sb.st_size > max_len) {
        st = clf_error(CLF_ERR_INPUT, "%s: %lld bytes, more than the limit of %llu", path,
                       (long long)sb.st_size, (unsigned long long)max_len);
        goto fail;
    }
    *fd = f;
    *size = (uint64_t)sb.st_size;
    return CLF_OK;
fail:
    close(f);
    return st;
}

clf_status clf_fs_check_input(const char *path)
{
    int fd;
    uint64_t size;
    clf_status st = clf_fs_open_regular(path, UINT64_MAX, &fd, &size);
    if (fd >= 0)
        close(fd);
    return st;
}

clf_status clf_fs_read_all(const char *path, size_t max_len, char **data, size_t *len)
{
    clf_status st = CLF_OK;
    char *buf = NULL;
    size_t cap, n = 0;
    uint64_t size;
    int fd;
    *data = NULL;
    *len = 0;
    if (max_len > SIZE_MAX / 2) /* so that max_len + READ_STEP + 1 cannot overflow */
        max_len = SIZE_MAX / 2;
    if ((st = clf_fs_open_regular(path, max_len, &fd, &size)) != CLF_OK)
        return st;
    /* the size is known before reading; it is checked again as the file is read, in case it
     * grows */
    cap = (size_t)size;
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
