/* serialize.c — raw tensor bytes between stdio files and tensor memory (see serialize.h).
 * The data is moved with one fwrite/fread per tensor, no intermediate copies for contiguous
 * CPU tensors. Files are little-endian; on a big-endian host the bytes are swapped. */
#define _POSIX_C_SOURCE   200809L
#define _FILE_OFFSET_BITS 64
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

static int host_is_big_endian(void) {
  const uint16_t one = 1;
  return *(const uint8_t *)&one == 0;
}

/* Reverses each elsize-byte element of buf in place. */
static void swap_bytes(uint8_t *buf, size_t n, size_t elsize) {
  if (elsize < 2) return;
  for (size_t i = 0; i < n; i++) {
    uint8_t *e = buf + i * elsize;
    for (size_t a = 0, b = elsize - 1; a < b; a++, b--) {
      uint8_t tmp = e[a];
      e[a] = e[b];
      e[b] = tmp;
    }
  }
}

dle_status dle_serialize_file_size(FILE *f, uint64_t *size, const char *what) {
  struct stat st;
  if (fflush(f) != 0 || fstat(fileno(f), &st) != 0)
    return dle_error("%s: cannot stat the file (%s)", what, strerror(errno));
  *size = (uint64_t)st.st_size;
  return DLE_OK;
}

dle_status dle_serialize_write(FILE *f, dle_tensor *t, uint64_t *nbytes, const char *what) {
  dle_tensor *cpu = NULL, *contig = NULL;
  bool prev = dle_set_grad_enabled(false);
  dle_status st = dle_to_device(&cpu, t, DLE_DEVICE_CPU);
  if (st == DLE_OK) st = dle_contiguous(&contig, cpu);
  dle_set_grad_enabled(prev);
  if (st != DLE_OK) {
    dle_tensor_release(cpu);
    return dle_error("%s: cannot write a tensor: %s", what, dle_last_error());
  }
  size_t elsize = dle_dtype_size(contig->dtype);
  size_t n = (size_t)dle_tensor_numel(contig);
  size_t bytes = n * elsize;
  if (bytes > 0) {
    const void *src = dle_tensor_data(contig);
    uint8_t *swapped = NULL;
    if (host_is_big_endian() && elsize > 1) {
      swapped = malloc(bytes);
      if (!swapped)
        st = dle_error("%s: out of memory (%zu bytes)", what, bytes);
      else {
        memcpy(swapped, src, bytes);
        swap_bytes(swapped, n, elsize);
        src = swapped;
      }
    }
    if (st == DLE_OK && fwrite(src, 1, bytes, f) != bytes)
      st = dle_error("%s: write failed after %zu bytes (%s)", what, bytes, strerror(errno));
    free(swapped);
  }
  dle_tensor_release(contig);
  dle_tensor_release(cpu);
  if (st == DLE_OK && nbytes) *nbytes = bytes;
  return st;
}

dle_status dle_serialize_read(dle_tensor **out, FILE *f, uint64_t offset, int ndim,
                              const int64_t *sizes, dle_dtype dtype, int swap, const char *what) {
  if (ndim < 0 || ndim > DLE_MAX_DIMS)
    return dle_error("%s: tensor has %d dims (at most %d supported)", what, ndim, DLE_MAX_DIMS);
  if ((int)dtype < 0 || dtype >= DLE_NUM_DTYPES) return dle_error("%s: bad dtype", what);
  size_t elsize = dle_dtype_size(dtype);
  uint64_t numel = 1;
  for (int i = 0; i < ndim; i++) {
    if (sizes[i] < 0)
      return dle_error("%s: negative size %lld in a tensor shape", what, (long long)sizes[i]);
    if (sizes[i] != 0 && numel > (UINT64_MAX / 16) / (uint64_t)sizes[i])
      return dle_error("%s: tensor shape too large", what);
    numel *= (uint64_t)sizes[i];
  }
  uint64_t bytes = numel * elsize, fsize = 0;
  if (dle_serialize_file_size(f, &fsize, what) != DLE_OK) return DLE_ERR;
  if (offset > fsize || bytes > fsize - offset)
    return dle_error("%s: truncated data: a %s tensor needs bytes %llu..%llu but the file has %llu",
                     what, dle_dtype_name(dtype), (unsigned long long)offset,
                     (unsigned long long)(offset + bytes), (unsigned long long)fsize);
  dle_tensor *t = NULL;
  if (dle_tensor_empty(&t, ndim, sizes, dtype, DLE_DEVICE_CPU) != DLE_OK) return DLE_ERR;
  if (bytes > 0) {
    if (fseeko(f, (off_t)offset, SEEK_SET) != 0) {
      dle_tensor_release(t);
      return dle_error("%s: cannot seek to byte %llu (%s)", what, (unsigned long long)offset,
                       strerror(errno));
    }
    size_t got = fread(dle_tensor_data(t), 1, (size_t)bytes, f);
    if (got != (size_t)bytes) {
      dle_tensor_release(t);
      return dle_error("%s: truncated data: read %zu of %llu bytes at offset %llu", what, got,
                       (unsigned long long)bytes, (unsigned long long)offset);
    }
    if ((swap != 0) != (host_is_big_endian() != 0))
      swap_bytes(dle_tensor_data(t), (size_t)numel, elsize);
  }
  *out = t;
  return DLE_OK;
}

dle_status dle_serialize_sync(FILE *f, const char *what) {
  if (fflush(f) != 0) return dle_error("%s: flush failed (%s)", what, strerror(errno));
  if (fsync(fileno(f)) != 0) return dle_error("%s: fsync failed (%s)", what, strerror(errno));
  return DLE_OK;
}

dle_status dle_serialize_sync_dir(const char *dir, const char *what) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY);
  if (fd < 0) return dle_error("%s: cannot open the directory %s (%s)", what, dir, strerror(errno));
  int rc = fsync(fd), e = errno;
  close(fd);
  /* Some file systems cannot fsync a directory (EINVAL): there is nothing more to wait for. */
  if (rc != 0 && e != EINVAL)
    return dle_error("%s: fsync of the directory %s failed (%s)", what, dir, strerror(e));
  return DLE_OK;
}

/* The pid in a name "<base>.tmp-<digits>", or 0 when name is not such a temp file of base. */
static long temp_pid(const char *name, const char *base) {
  size_t n = strlen(base);
  if (strncmp(name, base, n) != 0 || strncmp(name + n, ".tmp-", 5) != 0) return 0;
  const char *p = name + n + 5;
  if (*p < '1' || *p > '9') return 0;
  long pid = 0;
  for (; *p; p++) {
    if (*p < '0' || *p > '9' || pid > 99999999) return 0;
    pid = pid * 10 + (*p - '0');
  }
  return pid;
}

dle_status dle_serialize_remove_stale(const char *path, int *removed, const char *what) {
  *removed = 0;
  const char *slash = strrchr(path, '/');
  const char *base = slash ? slash + 1 : path;
  size_t dlen = slash ? (size_t)(slash - path) : 0;
  char *dir = malloc(dlen + 2);
  if (!dir) return dle_error("%s: out of memory", what);
  if (!slash)
    strcpy(dir, ".");
  else if (dlen == 0)
    strcpy(dir, "/");
  else {
    memcpy(dir, path, dlen);
    dir[dlen] = 0;
  }
  DIR *d = opendir(dir);
  if (!d) {
    /* the save itself reports a missing directory */
    free(dir);
    return DLE_OK;
  }
  dle_status st = DLE_OK;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    long pid = temp_pid(e->d_name, base);
    if (pid <= 0 || pid == (long)getpid()) continue;
    if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* alive, or not ours to judge */
    size_t len = strlen(dir) + strlen(e->d_name) + 2;
    char *full = malloc(len);
    if (!full) {
      st = dle_error("%s: out of memory", what);
      break;
    }
    snprintf(full, len, "%s/%s", dir, e->d_name);
    if (unlink(full) == 0)
      (*removed)++;
    else if (errno != ENOENT) /* another process may have removed it first */
      st = dle_error("%s: cannot remove the stale temp file %s (%s)", what, full, strerror(errno));
    free(full);
    if (st != DLE_OK) break;
  }
  closedir(d);
  free(dir);
  return st;
}
