/* classify.c — a graph exported from Lua (dle.freeze + dle.graph.save) classifying the
 * Fashion-MNIST test set from C, without Lua: the graph file is loaded with dle_graph_load and run
 * batch by batch with dle_graph_run on the images read from the IDX files.
 *
 *   build/bin/deploy_classify model.dleg [images.idx3-ubyte.gz labels.idx1-ubyte.gz [count]]
 *
 * The graph takes a float32 batch {B, 1, 28, 28} of pixels in [0, 1] (B is the batch it was frozen
 * with; a last partial batch is padded with zeros) and returns logits {B, 10}. Prints
 * "accuracy <correct>/<count> = <fraction>". */
#include "../../engine/dle.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define DEFAULT_IMAGES "/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz"
#define DEFAULT_LABELS "/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz"

/* The bytes of an IDX file (gzip or raw) after its header of `ndims` big-endian sizes; *count
 * receives the first size. NULL with a message on any problem. */
static unsigned char *read_idx(const char *path, int ndims, long *count, long item_bytes) {
  gzFile f = gzopen(path, "rb");
  if (!f) {
    fprintf(stderr, "classify: cannot open %s\n", path);
    return NULL;
  }
  unsigned char head[16];
  int want = 4 + 4 * ndims;
  unsigned char *data = NULL;
  if (gzread(f, head, (unsigned)want) != want || head[0] || head[1] || head[2] != 8 ||
      head[3] != ndims) {
    fprintf(stderr, "classify: %s is not an IDX file of %d dims of bytes\n", path, ndims);
  } else {
    *count = (long)head[4] << 24 | (long)head[5] << 16 | (long)head[6] << 8 | head[7];
    size_t n = (size_t)*count * (size_t)item_bytes;
    data = malloc(n ? n : 1);
    if (!data || gzread(f, data, (unsigned)n) != (int)n) {
      fprintf(stderr, "classify: %s is truncated\n", path);
      free(data);
      data = NULL;
    }
  }
  gzclose(f);
  return data;
}

static int fail(const char *what) {
  fprintf(stderr, "classify: %s: %s\n", what, dle_last_error());
  return 1;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s model.dleg [images labels [count]]\n", argv[0]);
    return 2;
  }
  const char *images_path = argc > 2 ? argv[2] : DEFAULT_IMAGES;
  const char *labels_path = argc > 3 ? argv[3] : DEFAULT_LABELS;
  dle_graph *g = NULL;
  if (dle_graph_load(&g, argv[1]) != DLE_OK) return fail("loading the graph");
  if (dle_graph_num_inputs(g) != 1 || dle_graph_num_outputs(g) != 1) {
    fprintf(stderr, "classify: the graph must take one input and give one output\n");
    return 1;
  }
  long n_images = 0, n_labels = 0;
  unsigned char *pixels = read_idx(images_path, 3, &n_images, 28 * 28);
  unsigned char *labels = pixels ? read_idx(labels_path, 1, &n_labels, 1) : NULL;
  if (!labels) return 1;
  long count = n_images < n_labels ? n_images : n_labels;
  if (argc > 4 && atol(argv[4]) > 0 && atol(argv[4]) < count) count = atol(argv[4]);

  /* the batch size the graph was frozen with */
  int ndim;
  int64_t in_sizes[DLE_MAX_DIMS];
  dle_dtype in_dtype;
  dle_graph_input(g, 0, &ndim, in_sizes, &in_dtype);
  if (ndim != 4 || in_sizes[1] != 1 || in_sizes[2] != 28 || in_sizes[3] != 28 ||
      in_dtype != DLE_F32) {
    fprintf(stderr, "classify: the graph's input must be float32 {B,1,28,28}\n");
    return 1;
  }
  int64_t batch = in_sizes[0];
  int64_t sizes[4] = {batch, 1, 28, 28};
  long correct = 0;
  for (long start = 0; start < count; start += batch) {
    dle_tensor *x = NULL, *logits = NULL;
    if (dle_tensor_empty(&x, 4, sizes, DLE_F32, (dle_device){DLE_CPU, 0}) != DLE_OK)
      return fail("allocating a batch");
    float *px = dle_tensor_data(x);
    long n = count - start < batch ? count - start : batch;
    memset(px, 0, sizeof(float) * (size_t)batch * 28 * 28);
    for (long i = 0; i < n * 28 * 28; i++) px[i] = pixels[start * 28 * 28 + i] / 255.0f;
    if (dle_graph_run(g, &x, 1, &logits, 1) != DLE_OK) return fail("running the graph");
    const float *l = dle_tensor_data(logits);
    int64_t classes = logits->sizes[1];
    for (long i = 0; i < n; i++) {
      int best = 0;
      for (int c = 1; c < classes; c++)
        if (l[i * classes + c] > l[i * classes + best]) best = c;
      correct += best == labels[start + i];
    }
    dle_tensor_release(x);
    dle_tensor_release(logits);
  }
  printf("accuracy %ld/%ld = %.4f\n", correct, count, (double)correct / (double)count);
  free(pixels);
  free(labels);
  dle_graph_free(g);
  return 0;
}
