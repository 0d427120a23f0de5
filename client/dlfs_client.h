/* libdlfs-client: read an epoch view's samples straight from dlfsd's memory.
 *
 * The C API of the local client protocol (docs/client-protocol.md; usage in
 * docs/client.md). A process on a DLFS node connects to dlfsd's client
 * socket, maps the dataset memory and a staging area read-only, and asks for
 * batches of view positions: it gets pointers to the samples' bytes, no copy
 * and no system call per sample. The mount stays the reference and the
 * fallback.
 *
 * Valid C99 and C++. Link with -ldlfs-client (libdlfs-client.so).
 *
 * Errors: a function returning int returns 0 or a negative errno value
 * (-EACCES, -EINVAL, -ENOENT, -EPROTO, -EBUSY, -EIO as dlfsd answered them,
 * -ECONNRESET when the daemon went away and did not come back), and
 * dlfs_client_error() says what went wrong, naming the thing.
 *
 * Threads: a dlfs_client is not thread-safe. Use one per thread (each has its
 * own connection and staging memory) or serialize the calls. Do not use one
 * across fork(): open another in the child.
 */
#ifndef DLFS_CLIENT_H
#define DLFS_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define DLFS_CLIENT_API __attribute__((visibility("default")))
#else
#define DLFS_CLIENT_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dlfs_client dlfs_client;

/* One member of a sample: its bytes are data + offset .. + length of the
 * sample's (dlfs_sample.data). */
typedef struct {
  uint32_t offset;
  uint32_t length;
} dlfs_member;

/* One sample of a batch.
 *
 * data, length: the sample's bytes. Read-only memory: writing to it faults.
 *   A grouped sample's bytes span its members, which need not be back to
 *   back (in WebDataset tar shards the tar headers between them lie inside
 *   the span): read each member through `member`.
 * sample_id: the sample's id, its position in the dataset's canonical order
 *   (the .index file's id).
 * members, member: 1 and {0, length} for a dataset that is not grouped; for a
 *   grouped one, its member count and where each lies, in order.
 *
 * How long the pointers stay valid: see dlfs_client_batch. */
typedef struct {
  const void* data;
  uint64_t length;
  uint64_t sample_id;
  uint32_t members;
  const dlfs_member* member;
} dlfs_sample;

/* Opens the dataset at dataset_dir, a dataset directory of a DLFS mount
 * ("/mnt/dlfs/imagenet"). The socket and the dataset's name are read from the
 * extended attributes user.dlfs.client_socket and user.dlfs.dataset of
 * <dataset_dir>/epochs/0/1/0.index; the environment variable
 * DLFS_CLIENT_SOCKET, when set, overrides the socket's path.
 *
 * Returns NULL on failure, with a message in err (err_len bytes, NUL-
 * terminated, truncated if longer; err may be NULL): among others when the
 * daemon serves no client socket (read through the mount then), and dlfsd's
 * own message when it refuses (EACCES: this user may not read the views). */
DLFS_CLIENT_API dlfs_client* dlfs_client_open(const char* dataset_dir, char* err, size_t err_len);

/* Like dlfs_client_open, with the socket's path and the dataset's name given. */
DLFS_CLIENT_API dlfs_client* dlfs_client_connect(const char* socket_path, const char* dataset, char* err,
                                                 size_t err_len);

/* Selects the view later batches read: the one the mount serves as
 * epochs/<epoch>/<world_size>/<rank>.* (the same samples, in the same order).
 * *samples (if samples is not NULL) is set to the view's sample count.
 * Selecting a view again is cheap (the client remembers the daemon's ids). An
 * opportunistic dataset's views are refused (-EINVAL): read the mount. After
 * a failure no view is selected. */
DLFS_CLIENT_API int dlfs_client_view(dlfs_client* c, uint32_t epoch, uint32_t world_size, uint32_t rank,
                                     uint64_t* samples);

/* Fills out[0 .. *got) with the samples at positions [start, start + count)
 * of the selected view; out has room for count samples.
 *
 * *got < count at the view's end (0 when start is at or past it), and when
 * the samples dlfsd had to copy for this call filled its staging slot (then
 * at least one sample is returned): ask again from start + *got. Short
 * replies that copied nothing are asked again within the call.
 *
 * Validity: each call uses the next of the client's staging slots
 * (dlfs_client_slots()), in rotation, and one slot only.
 *   - A sample in the dataset memory stays valid while the client is open.
 *   - A sample dlfsd copied into the staging slot (one from another node, a
 *     round, a part not loaded yet), and every sample's member, stay
 *     valid until slots - 1 further dlfs_client_batch calls have returned:
 *     with 4 slots, the samples of call n are overwritten by call n + 4.
 *   Copy what must live longer.
 *
 * When the daemon restarted (the socket closed), the call reconnects, opens
 * the dataset and the view again and repeats the request, for up to the
 * reconnect timeout; samples already returned stay valid (the old memory
 * stays mapped until dlfs_client_close).
 *
 * Returns 0, or a negative errno; on an error *got still counts the samples
 * filled (and valid) before it. */
DLFS_CLIENT_API int dlfs_client_batch(dlfs_client* c, uint64_t start, uint32_t count, dlfs_sample* out,
                                      uint32_t* got);

/* How long a call waits for a daemon that went away to come back, in seconds
 * (default 30; 0: one attempt to reconnect, no waiting). */
DLFS_CLIENT_API void dlfs_client_set_reconnect_timeout(dlfs_client* c, double seconds);

/* The dataset: its sample count, its name, its format ("files", "fixed",
 * "lmdb", "tfrecord", "tar", as dlfsd names it), whether its samples are
 * groups of members, and its record size for a fixed-size dataset (else 0). */
DLFS_CLIENT_API uint64_t dlfs_client_samples(const dlfs_client* c);
DLFS_CLIENT_API const char* dlfs_client_dataset(const dlfs_client* c);
DLFS_CLIENT_API const char* dlfs_client_format(const dlfs_client* c);
DLFS_CLIENT_API int dlfs_client_grouped(const dlfs_client* c);
DLFS_CLIENT_API uint64_t dlfs_client_fixed_size(const dlfs_client* c);

/* The staging memory: its slot count (the validity window above) and each
 * slot's bytes (what one call may receive copied). */
DLFS_CLIENT_API uint32_t dlfs_client_slots(const dlfs_client* c);
DLFS_CLIENT_API uint64_t dlfs_client_slot_bytes(const dlfs_client* c);

/* The last error's message ("" if none). Valid until the next call on c. */
DLFS_CLIENT_API const char* dlfs_client_error(const dlfs_client* c);

/* Closes the connection and unmaps the memory: every sample pointer becomes
 * invalid. NULL is accepted. */
DLFS_CLIENT_API void dlfs_client_close(dlfs_client* c);

#ifdef __cplusplus
}
#endif

#endif /* DLFS_CLIENT_H */
