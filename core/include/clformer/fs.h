/* clformer/fs.h - files written whole or not at all, files read whole within a limit, and
 * lock files.
 *
 * Atomic write: the content goes to a temporary file in the same directory
 * (<path>.tmp.<pid>), which is flushed to disk (fsync), renamed over path and made durable by
 * an fsync of the directory. A reader, or a machine that loses power, sees the old file or
 * the new one, never half of one; on any failure the temporary file is removed and the old
 * file is left as it was.
 *
 *     static clf_status put(FILE *f, void *ctx) { fputs(ctx, f); return CLF_OK; }
 *     st = clf_fs_write_atomic("run/config.yaml", put, text);
 *
 * The output path is looked at first: a path that exists and is not a regular file (a
 * device such as /dev/null, a FIFO, a socket, a directory) is refused with one line and left
 * as it is, never replaced by a regular file. A symbolic link to a regular file is written
 * through: the temporary file goes beside the link's target, is renamed over the target,
 * and the link stays; a link that leads nowhere, or to anything but a regular file, is
 * refused. The file replaced keeps its permission bits (rwx; set-id bits are dropped) and,
 * for root, its owner and group.
 *
 * The name is looked at again (lstat) right before the rename: one that became anything
 * but a regular file (or nothing) since the first look is refused and left as it is
 * (CLF_ERR_INPUT, "<path>: became a FIFO while it was being written: not replaced"); a
 * free name is taken with renameat2(RENAME_NOREPLACE) where the file system has it. The
 * moment between that second look and a rename() over an existing regular file remains
 * (README, "Kill, full disk, device faults").
 *
 * Reading: clf_fs_open_regular and clf_fs_read_all look at what path is before they read a
 * byte and never wait: a FIFO, a device (/dev/urandom, /dev/zero), a socket or a directory
 * is refused with one line at once.
 *
 * Errors are one line naming the file and the reason (strerror), like every clformer error:
 * "run/config.yaml: cannot write run/config.yaml.tmp.4242: No space left on device".
 * CLF_FAULT=write:N (clformer/fault.h) fails the Nth write of a process in this way. */
#ifndef CLFORMER_FS_H
#define CLFORMER_FS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "clformer/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Writes the file's content to f (the temporary file, opened "wb"). fn need not check each
 * stdio call: the stream's error flag and errno are checked after it returns. It returns
 * CLF_OK, or a status whose message it has recorded (clf_error) to abandon the write. */
typedef clf_status (*clf_fs_write_fn)(FILE *f, void *ctx);

/* Replaces path with what fn writes, atomically (see above). A new file has mode 0666 less
 * the umask; a replaced one keeps its permission bits. On failure path is untouched and no
 * temporary file remains: fn's own status; CLF_ERR_IO ("cannot create", "cannot write", "cannot
 * rename") naming path, the temporary file and strerror; or clf_fs_check_output's refusal,
 * before anything is created. */
CLF_API clf_status clf_fs_write_atomic(const char *path, clf_fs_write_fn fn, void *ctx);

/* clf_fs_write_atomic of the n bytes at data. */
CLF_API clf_status clf_fs_write_atomic_bytes(const char *path, const void *data, size_t n);

/* Refuses, with one line naming path, an output path that exists and is not a regular file
 * (nor a symbolic link to one): CLF_ERR_IO "<path>: cannot write: Is a directory" for a
 * directory, CLF_ERR_INPUT "<path>: not a regular file (a FIFO): not replaced" for a FIFO, a
 * device or a socket, and for a symbolic link that leads nowhere. CLF_OK when path does not
 * exist or is (a link to) a regular file. clf_fs_write_atomic and clf_fs_link_atomic make
 * this check themselves; a writer that opens its file another way (appending) calls it
 * first. */
CLF_API clf_status clf_fs_check_output(const char *path);

/* Makes path a hard link to the existing file target (on the same file system), replacing
 * path atomically: the link is made under <path>.tmp.<pid>, renamed over path, and the
 * directory fsynced, so path names the old file or target, never nothing. path is checked
 * as clf_fs_check_output does (a symbolic link at path is followed: its target is
 * replaced). On failure path is untouched and no temporary name remains: CLF_ERR_IO naming
 * path and strerror. */
CLF_API clf_status clf_fs_link_atomic(const char *target, const char *path);

/* Opens path for reading, without waiting, when it is a regular file of at most max_len
 * bytes: *fd is then a blocking descriptor (close it) and *size the file's size. What path
 * is gets looked at before it is opened (a device is never opened) and again on the open
 * descriptor (opened with O_NONBLOCK, so that a FIFO put there in between does not block).
 * Refusals, one line naming path, *fd -1: CLF_ERR_IO "cannot open" with strerror, or
 * "cannot read: Is a directory"; CLF_ERR_INPUT "not a regular file (a FIFO)" (a character
 * or block device, a socket), or "<N> bytes, more than the limit of <max_len>". */
CLF_API clf_status clf_fs_open_regular(const char *path, uint64_t max_len, int *fd, uint64_t *size);

/* For a reader that opens path itself (dlopen of a backend or plugin): refuses, as
 * clf_fs_open_regular does and without waiting, a path that is not a regular file, so
 * that a FIFO there fails at once instead of blocking the open. */
CLF_API clf_status clf_fs_check_input(const char *path);

/* Reads the whole of path into *data (malloc'd, with a '\0' after the last byte that *len
 * does not count; free() it). A file of more than max_len bytes is refused with
 * CLF_ERR_INPUT before anything is allocated for it; anything but a regular file is refused
 * before it is read (clf_fs_open_regular); a file that cannot be opened or read gives
 * CLF_ERR_IO naming it and strerror. On failure *data is NULL and *len 0. */
CLF_API clf_status clf_fs_read_all(const char *path, size_t max_len, char **data, size_t *len);

/* An exclusive advisory lock held through a lock file (flock: it protects against other
 * processes and against a second clf_fs_lock in this process; it dies with the process, so
 * a killed holder leaves no stale lock). */
typedef struct clf_fs_lock clf_fs_lock;

/* Takes the lock on path, creating the file, without waiting. The file then holds the
 * holder's process id and host name. When another holder has it: CLF_ERR_IO, naming path
 * and the holder ("...: locked by process 4242 on host gpu1"). */
CLF_API clf_status clf_fs_lock_acquire(const char *path, clf_fs_lock **out);

/* Removes the lock file and releases the lock; NULL is a no-op. */
CLF_API void clf_fs_lock_release(clf_fs_lock *lock);

#ifdef __cplusplus
}
#endif
#endif
