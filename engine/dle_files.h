/* dle_files.h — graph files and raw tensor bytes in files, of the public C interface: a part of
 * engine/dle.h, which includes it (include dle.h, not this file); its conventions hold here. */
#ifndef DLE_H
#error "include dle.h, not dle_files.h"
#endif
#ifndef DLE_FILES_H
#define DLE_FILES_H

/* ---------------------------------------------------------------- graph files (dle.graph.save) */
/* A graph saved by dle.graph.save, loaded and run without Lua (engine/graph_file.c). Loading checks
 * the whole file (an error naming the path and byte otherwise); running takes the inputs in order
 * (the saved shapes and dtypes), calls the ops in order without recording gradients, and fills
 * outputs with new references. Random ops draw from the default generator. */
typedef struct dle_graph dle_graph;
dle_status dle_graph_load(dle_graph **g, const char *path);
int dle_graph_num_inputs(const dle_graph *g);
int dle_graph_num_outputs(const dle_graph *g);
/* The shape and dtype input k (0-based) must have. */
dle_status dle_graph_input(const dle_graph *g, int k, int *ndim, int64_t *sizes, dle_dtype *dtype);
dle_status dle_graph_run(const dle_graph *g, dle_tensor *const *inputs, int nin,
                         dle_tensor **outputs, int nout);
void dle_graph_free(dle_graph *g);

/* ---------------------------------------------------------------- tensor files (dle.save / dle.load) */
/* Raw tensor bytes to and from stdio files for dle.io's formats (their headers are Lua's). */
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
