/* lua_data.c — native helpers for dle.data: an IDX reader (raw or gzip, through zlib) and
 * file memory maps as tensors. Registered into dle.core as read_idx(path) and
 * memmap(path, dtype, sizes, offset, writable); lua/dle/data/init.lua wraps them. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "lua_util.h"

/* ---------------------------------------------------------------- IDX files */

/* One IDX element type: its code in the header, its size in the file, the dle dtype it becomes. */
typedef struct {
  int code;
  int file_size;
  dle_dtype dtype;
  const char *name;
} idx_type;

static const idx_type idx_types[] = {
    {0x08, 1, DLE_U8, "uint8"},  {0x09, 1, DLE_I8, "int8"},     {0x0B, 2, DLE_I16, "int16"},
    {0x0C, 4, DLE_I32, "int32"}, {0x0D, 4, DLE_F32, "float32"}, {0x0E, 8, DLE_F64, "float64"},
};

static const idx_type *idx_type_of(int code) {
  for (size_t i = 0; i < sizeof idx_types / sizeof idx_types[0]; i++)
    if (idx_types[i].code == code) return &idx_types[i];
  return NULL;
}

/* Reads exactly n bytes; returns how many were read (< n at end of file), or -1 on a zlib
 * error (message in *err). gzread takes unsigned counts, so large reads go in pieces. */
static int64_t gz_read_full(gzFile f, void *buf, size_t n, const char **err) {
  size_t done = 0;
  while (done < n) {
    size_t want = n - done > (1u << 30) ? (1u << 30) : n - done;
    int got = gzread(f, (char *)buf + done, (unsigned)want);
    if (got < 0) {
      int code = 0;
      *err = gzerror(f, &code);
      return -1;
    }
    if (got == 0) break;
    done += (size_t)got;
  }
  return (int64_t)done;
}

/* Converts count big-endian file elements of type ty at src into dst (the dle dtype). */
static void idx_convert(void *dst, const unsigned char *src, size_t count, const idx_type *ty) {
  switch (ty->code) {
    case 0x08:
    case 0x09: memcpy(dst, src, count); break;
    case 0x0B:
      for (size_t i = 0; i < count; i++) {
        uint16_t v = (uint16_t)((unsigned)src[2 * i] << 8 | src[2 * i + 1]);
        memcpy((char *)dst + 2 * i, &v, 2);
      }
      break;
    case 0x0C:
    case 0x0D:
      for (size_t i = 0; i < count; i++) {
        const unsigned char *p = src + 4 * i;
        uint32_t v = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
        memcpy((char *)dst + 4 * i, &v, 4);
      }
      break;
    case 0x0E:
      for (size_t i = 0; i < count; i++) {
        const unsigned char *p = src + 8 * i;
        uint64_t v = 0;
        for (int k = 0; k < 8; k++) v = v << 8 | p[k];
        memcpy((char *)dst + 8 * i, &v, 8);
      }
      break;
  }
}

/* Reads an IDX file (gzip-compressed or raw: zlib's gzread passes raw files through) into a new
 * tensor. On error returns DLE_ERR with a message naming the path and the problem. */
static dle_status read_idx(const char *path, dle_tensor **out) {
  *out = NULL;
  errno = 0;
  gzFile f = gzopen(path, "rb");
  if (!f)
    return dle_error("idx: cannot open %s: %s", path, errno ? strerror(errno) : "out of memory");
  dle_tensor *t = NULL;
  unsigned char *buf = NULL;
  const char *zerr = NULL;
  const char *kind = gzdirect(f) ? "raw" : "gzip";
  unsigned char head[4 + 4 * DLE_MAX_DIMS];
  int64_t got = gz_read_full(f, head, 4, &zerr);
  if (got < 0) {
    dle_error("idx: %s: corrupt %s data: %s", path, kind, zerr);
    goto fail;
  }
  if (got < 4) {
    dle_error("idx: %s: truncated header (%lld of 4 bytes)", path, (long long)got);
    goto fail;
  }
  const idx_type *ty = idx_type_of(head[2]);
  if (head[0] != 0 || head[1] != 0 || !ty) {
    dle_error(
        "idx: %s: bad magic %02x %02x %02x %02x (expected 00 00 <type 08/09/0b/0c/0d/0e> "
        "<ndim>)",
        path, head[0], head[1], head[2], head[3]);
    goto fail;
  }
  int ndim = head[3];
  if (ndim > DLE_MAX_DIMS) {
    dle_error("idx: %s: %d dimensions, at most %d supported", path, ndim, DLE_MAX_DIMS);
    goto fail;
  }
  got = gz_read_full(f, head + 4, 4 * (size_t)ndim, &zerr);
  if (got < 0) {
    dle_error("idx: %s: corrupt %s data: %s", path, kind, zerr);
    goto fail;
  }
  if (got < 4 * ndim) {
    dle_error("idx: %s: truncated header (sizes of %d dims need %d bytes, got %lld)", path, ndim,
              4 * ndim, (long long)got);
    goto fail;
  }
  int64_t sizes[DLE_MAX_DIMS];
  /* nonzero: the product of the non-zero sizes, checked as well, so that a zero size cannot hide
   * sizes whose product overflows (the engine checks shapes the same way) */
  uint64_t count = 1, nonzero = 1;
  for (int d = 0; d < ndim; d++) {
    const unsigned char *p = head + 4 + 4 * d;
    sizes[d] = (int64_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]);
    if (sizes[d] != 0 && nonzero > (UINT64_C(1) << 48) / (uint64_t)sizes[d]) {
      dle_error("idx: %s: sizes too large (dim %d is %lld)", path, d + 1, (long long)sizes[d]);
      goto fail;
    }
    count *= (uint64_t)sizes[d];
    if (sizes[d] != 0) nonzero *= (uint64_t)sizes[d];
  }
  /* A raw file's size is known: a header announcing more data than the file holds is an error
   * before anything is allocated for it. */
  struct stat st;
  uint64_t need = 4 + 4 * (uint64_t)ndim + count * (uint64_t)ty->file_size;
  if (gzdirect(f) && stat(path, &st) == 0 && need > (uint64_t)st.st_size) {
    char shape[128];
    dle_error("idx: %s: truncated data: a %s tensor of size %s needs %llu bytes, the file has %llu",
              path, ty->name, dle_shape_str(shape, sizeof shape, ndim, sizes),
              (unsigned long long)(count * (uint64_t)ty->file_size),
              (unsigned long long)(st.st_size - 4 - 4 * ndim));
    goto fail;
  }
  if (dle_tensor_empty(&t, ndim, sizes, ty->dtype, DLE_DEVICE_CPU) != DLE_OK) {
    char why[256];
    snprintf(why, sizeof why, "%s", dle_last_error());
    dle_error("idx: %s: %s", path, why);
    goto fail;
  }
  /* Convert in chunks: the file's element size can differ from the tensor's. */
  size_t chunk = 1 << 16;
  buf = malloc(chunk * (size_t)ty->file_size);
  if (!buf) {
    dle_error("idx: %s: out of memory", path);
    goto fail;
  }
  char *dst = dle_tensor_data(t);
  size_t esz = dle_dtype_size(ty->dtype);
  uint64_t done = 0;
  while (done < count) {
    size_t n = count - done < chunk ? (size_t)(count - done) : chunk;
    got = gz_read_full(f, buf, n * (size_t)ty->file_size, &zerr);
    if (got < 0) {
      dle_error("idx: %s: corrupt %s data: %s", path, kind, zerr);
      goto fail;
    }
    if ((size_t)got < n * (size_t)ty->file_size) {
      char shape[128];
      dle_error(
          "idx: %s: truncated data: a %s tensor of size %s needs %llu bytes, the file has %llu",
          path, ty->name, dle_shape_str(shape, sizeof shape, ndim, sizes),
          (unsigned long long)(count * (uint64_t)ty->file_size),
          (unsigned long long)(done * (uint64_t)ty->file_size + (uint64_t)got));
      goto fail;
    }
    idx_convert(dst + done * esz, buf, n, ty);
    done += n;
  }
  /* Anything after the data means the header's sizes do not describe the file. */
  unsigned char extra;
  got = gz_read_full(f, &extra, 1, &zerr);
  if (got < 0) {
    dle_error("idx: %s: corrupt %s data: %s", path, kind, zerr);
    goto fail;
  }
  if (got > 0) {
    char shape[128];
    dle_error("idx: %s: size mismatch: the file has more data than a %s tensor of size %s", path,
              ty->name, dle_shape_str(shape, sizeof shape, ndim, sizes));
    goto fail;
  }
  free(buf);
  int rc = gzclose(f);
  if (rc != Z_OK) {
    dle_tensor_release(t);
    return dle_error("idx: %s: corrupt gzip data (error %d at close)", path, rc);
  }
  *out = t;
  return DLE_OK;
fail:
  free(buf);
  dle_tensor_release(t);
  gzclose(f);
  return DLE_ERR;
}

/* dle.core._read_idx(path) -> tensor */
static int l_read_idx(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  dle_tensor *t = NULL;
  DLE_LUA_TRY(L, read_idx(path, &t));
  dle_lua_push(L, t);
  return 1;
}

/* ---------------------------------------------------------------- memory maps */

/* The storage's release callback: data/nbytes are the tensor's window into the mapping, which
 * starts at the page boundary below data. */
static void munmap_release(void *ctx, void *data, size_t nbytes) {
  (void)ctx;
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  uintptr_t base = (uintptr_t)data & ~(page - 1);
  munmap((void *)base, nbytes + ((uintptr_t)data - base));
}

/* Maps [offset, offset + bytes of the shape) of path as a tensor. writable: MAP_SHARED, writes
 * reach the file; otherwise MAP_PRIVATE copy-on-write: writes are allowed but stay private. */
static dle_status map_file(dle_tensor **out, const char *path, dle_dtype dtype, int ndim,
                           const int64_t *sizes, int64_t offset, bool writable) {
  *out = NULL;
  char shape[128];
  dle_shape_str(shape, sizeof shape, ndim, sizes);
  if (offset < 0) return dle_error("memmap: %s: offset %lld is negative", path, (long long)offset);
  size_t esz = dle_dtype_size(dtype);
  if (offset % (int64_t)esz != 0)
    return dle_error("memmap: %s: offset %lld is not a multiple of the %s element size (%zu)", path,
                     (long long)offset, dle_dtype_name(dtype), esz);
  uint64_t count = 1;
  for (int d = 0; d < ndim; d++) {
    if (sizes[d] < 0) return dle_error("memmap: %s: negative size in shape %s", path, shape);
    if (sizes[d] != 0 && count > (UINT64_C(1) << 56) / (uint64_t)sizes[d])
      return dle_error("memmap: %s: shape %s is too large", path, shape);
    count *= (uint64_t)sizes[d];
  }
  uint64_t nbytes = count * esz;
  int fd = open(path, writable ? O_RDWR : O_RDONLY);
  if (fd < 0) return dle_error("memmap: cannot open %s: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    return dle_error("memmap: cannot stat %s: %s", path, strerror(e));
  }
  if ((uint64_t)st.st_size < (uint64_t)offset + nbytes) {
    close(fd);
    return dle_error(
        "memmap: %s: file too short: %s %s at offset %lld needs %llu bytes, the file has "
        "%lld",
        path, dle_dtype_name(dtype), shape, (long long)offset,
        (unsigned long long)((uint64_t)offset + nbytes), (long long)st.st_size);
  }
  if (nbytes == 0) { /* mmap refuses length 0: an empty tensor needs no mapping */
    close(fd);
    return dle_tensor_empty(out, ndim, sizes, dtype, DLE_DEVICE_CPU);
  }
  int64_t page = (int64_t)sysconf(_SC_PAGESIZE);
  int64_t base_off = offset - offset % page;
  size_t map_len = (size_t)(nbytes + (uint64_t)(offset - base_off));
  void *base = mmap(NULL, map_len, PROT_READ | PROT_WRITE, writable ? MAP_SHARED : MAP_PRIVATE, fd,
                    (off_t)base_off);
  int e = errno;
  close(fd); /* the mapping keeps the file alive */
  if (base == MAP_FAILED) return dle_error("memmap: cannot map %s: %s", path, strerror(e));
  void *data = (char *)base + (offset - base_off);
  if (dle_tensor_from_memory(out, data, (size_t)nbytes, ndim, sizes, NULL, dtype, munmap_release,
                             NULL) != DLE_OK) {
    munmap(base, map_len);
    return DLE_ERR;
  }
  return DLE_OK;
}

/* dle.core._memmap(path, dtype, sizes_table, offset = 0, writable = false) -> tensor */
static int l_memmap(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  dle_dtype dtype = dle_lua_check_dtype(L, 2, "memmap");
  int64_t sizes[DLE_MAX_DIMS];
  int next = 0;
  luaL_checktype(L, 3, LUA_TTABLE);
  int ndim = dle_lua_sizes(L, 3, sizes, &next, "memmap", 0);
  lua_Integer offset = luaL_optinteger(L, 4, 0);
  bool writable = lua_toboolean(L, 5);
  dle_tensor *t = NULL;
  DLE_LUA_TRY(L, map_file(&t, path, dtype, ndim, sizes, (int64_t)offset, writable));
  dle_lua_push(L, t);
  return 1;
}

void dle_lua_open_data(lua_State *L, int module, int methods) {
  (void)methods;
  static const luaL_Reg fns[] = {{"_read_idx", l_read_idx}, {"_memmap", l_memmap}, {NULL, NULL}};
  dle_lua_setfuncs(L, module, fns);
}
