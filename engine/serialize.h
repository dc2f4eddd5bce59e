/* serialize.h — raw tensor bytes to and from stdio files, for the file formats in dle.io
 * (dle.save/load, .npy, safetensors). The formats' headers are written in Lua; only the tensor
 * data goes through here, straight between the FILE and the tensor's memory. */
#ifndef DLE_SERIALIZE_H
#define DLE_SERIALIZE_H

#include <stdint.h>
#include <stdio.h>

#include "dle.h"

/* Writes t's elements in C order as raw little-endian bytes at f's current position (a CUDA
 * or non-contiguous tensor is copied to a contiguous CPU tensor first). *nbytes receives the
 * number of bytes written. `what` names the file in error messages. */
dle_status dle_serialize_write(FILE *f, dle_tensor *t, uint64_t *nbytes, const char *what);

/* Reads a new contiguous CPU tensor of the given dtype and sizes from byte `offset` of f.
 * Checks offset + numel * element size against the file's size first (an error naming `what`
 * and "truncated data" otherwise). swap != 0 reverses the bytes of every element (big-endian
 * sources). */
dle_status dle_serialize_read(dle_tensor **out, FILE *f, uint64_t offset, int ndim,
                              const int64_t *sizes, dle_dtype dtype, int swap, const char *what);

/* The size of f in bytes (its position is kept), or an error. */
dle_status dle_serialize_file_size(FILE *f, uint64_t *size, const char *what);

/* fflush + fsync: the data has reached the disk before the file is renamed into place. */
dle_status dle_serialize_sync(FILE *f, const char *what);

/* fsync of a directory (opened O_RDONLY | O_DIRECTORY): a rename into it is on the disk. */
dle_status dle_serialize_sync_dir(const char *dir, const char *what);

/* Removes the temp files "<path>.tmp-<pid>" that dead processes left next to path (a save killed
 * mid-write); a pid that is still alive (kill(pid, 0) does not fail with ESRCH) keeps its file.
 * *removed receives how many were removed. */
dle_status dle_serialize_remove_stale(const char *path, int *removed, const char *what);

#endif
