/* chutney data pipeline: IDX datasets (Fashion-MNIST) and a batching loader. C99.
 *
 * The conventions of chutney.h apply: every function returns a ctn_status (message from
 * ctn_last_error()), out-parameters are untouched on failure, *_release accepts NULL, nothing
 * aborts or throws.
 *
 * A dataset holds every image (u8 pixels) and label in host memory; it is immutable once opened.
 * A loader turns a dataset into batches of f32 images and integer labels: shuffling with a seed,
 * normalisation, optional augmentation (random crop with padding, horizontal flip), assembled on
 * worker threads into a ring of prefetched batches so that the consumer (the training loop)
 * normally finds its next batch ready. The loader measures how long the consumer still waited.
 *
 * Determinism: the order of an epoch depends only on (seed, epoch); the augmentation of a sample
 * depends only on (seed, epoch, sample index). The batches are therefore identical for any
 * number of worker threads and any prefetch depth.
 */
#ifndef CHUTNEY_DATA_H
#define CHUTNEY_DATA_H

#include "chutney.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ctn_dataset ctn_dataset;
typedef struct ctn_loader ctn_loader;

/* =============================================================================================
 * Datasets
 * =========================================================================================== */

/* Where Debian's dataset-fashion-mnist package installs the files. */
#define CTN_FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"

/* Opens an image file (IDX rank 3, u8: magic 0x00000803) and a label file (IDX rank 1, u8:
 * magic 0x00000801). Each file may be gzip-compressed or plain (detected from its content).
 * Everything is read into memory; the files are closed before this returns.
 * Errors: CTN_ERR_INVALID_ARGUMENT (NULL argument); CTN_ERR_IO (a file cannot be opened or
 * read); CTN_ERR_CORRUPT (bad magic, unsupported element type, a truncated file, trailing bytes,
 * a gzip error, absurd dimensions, different image and label counts). Messages name the file.
 * Hostile files never crash the process, and memory stays bounded by the data actually present.
 * Thread-safety: may be called from any thread. since 1.1 */
CTN_API ctn_status ctn_dataset_open_idx(const char *images_path, const char *labels_path,
                                        ctn_dataset **out);

/* Opens the Fashion-MNIST split `split` ("train": 60000 images, or "test": 10000) from
 * `data_dir` (NULL: CTN_FASHION_MNIST_DIR). Looks for {train,t10k}-images-idx3-ubyte and
 * {train,t10k}-labels-idx1-ubyte, with ".gz" first, then without.
 * Errors as ctn_dataset_open_idx, plus: CTN_ERR_INVALID_ARGUMENT (unknown split); CTN_ERR_IO
 * when the files are missing (the message names the files tried and the Debian package
 * dataset-fashion-mnist); CTN_ERR_CORRUPT when images are not 28x28 or a label exceeds 9.
 * since 1.1 */
CTN_API ctn_status ctn_dataset_open_fashion_mnist(const char *data_dir, const char *split,
                                                  ctn_dataset **out);

/* Drops the caller's reference. Loaders created from the dataset keep their own, so a dataset
 * may be released while its loaders live. Accepts NULL. since 1.1 */
CTN_API void ctn_dataset_release(ctn_dataset *ds);

typedef struct ctn_dataset_info {
  uint32_t struct_size; /* set by the caller to sizeof(ctn_dataset_info) */
  uint32_t num_classes; /* largest label + 1 (10 for Fashion-MNIST) */
  int64_t count;        /* number of samples */
  int32_t rows;         /* image height */
  int32_t cols;         /* image width */
} ctn_dataset_info;

/* Fills *out (up to out->struct_size). Thread-safe (datasets are immutable). since 1.1 */
CTN_API ctn_status ctn_dataset_info_get(const ctn_dataset *ds, ctn_dataset_info *out);

/* Copies sample `index` (< count): rows*cols raw u8 pixels, row-major, into `pixels` (may be
 * NULL) and its label into *out_label (may be NULL). For tests and tools; loaders are the fast
 * path. Thread-safe. since 1.1 */
CTN_API ctn_status ctn_dataset_get(const ctn_dataset *ds, int64_t index, uint8_t *pixels,
                                   int32_t *out_label);

/* =============================================================================================
 * Loaders
 * =========================================================================================== */

/* Flags of ctn_loader_options.flags. */
#define CTN_LOADER_SHUFFLE 1u     /* a new permutation each epoch, from (seed, epoch) */
#define CTN_LOADER_DROP_LAST 2u   /* skip the last batch when it would be partial */
#define CTN_LOADER_FLAT 4u        /* images as [B, rows*cols] instead of [B, 1, rows, cols] */
#define CTN_LOADER_HFLIP 8u       /* flip each image left-right with probability 1/2 */
#define CTN_LOADER_SYNCHRONOUS 16u /* no threads: ctn_loader_next assembles the batch itself */

/* Options for ctn_loader_create. Set struct_size = sizeof(ctn_loader_options); zero the rest for
 * defaults. Fields added in later minors are appended. */
typedef struct ctn_loader_options {
  uint32_t struct_size;
  uint32_t flags;         /* CTN_LOADER_* */
  int32_t batch_size;     /* >= 1 */
  int32_t crop_padding;   /* > 0: pad each side with this many zero pixels, then crop a random
                             rows x cols window (the classic "random crop"); 0: off */
  uint64_t seed;          /* shuffling and augmentation */
  double mean;            /* pixel value = (u8 / 255 - mean) / std */
  double std;             /* 0 means 1 */
  int32_t num_workers;    /* threads assembling batches; 0: 1. Ignored with SYNCHRONOUS */
  int32_t prefetch;       /* batches assembled ahead of the consumer; 0: 2 * num_workers + 1 */
} ctn_loader_options;

/* Creates a loader over `ds` (the loader takes its own reference) and starts epoch 0: its worker
 * threads begin assembling batches at once. Buffers for `prefetch` batches are allocated here;
 * nothing is allocated per batch afterwards.
 * Errors: CTN_ERR_INVALID_ARGUMENT (NULL, struct_size too small, batch_size < 1, std < 0,
 * crop_padding < 0 or > 64, num_workers > 64, prefetch > 1024); CTN_ERR_INTERNAL when a thread
 * cannot be started. since 1.1 */
CTN_API ctn_status ctn_loader_create(ctn_dataset *ds, const ctn_loader_options *options,
                                     ctn_loader **out);

/* Stops and joins the worker threads, frees the buffers, drops the dataset reference.
 * Accepts NULL. since 1.1 */
CTN_API void ctn_loader_release(ctn_loader *loader);

/* Creates a pair of tensors of the shapes ctn_loader_next expects: images f32 [B, 1, rows, cols]
 * (or [B, rows*cols] with CTN_LOADER_FLAT) and labels i32 [B], B = batch_size. The caller owns
 * and releases both. since 1.1 */
CTN_API ctn_status ctn_loader_batch_create(ctn_loader *loader, ctn_tensor **out_images,
                                           ctn_tensor **out_labels);

/* Copies the next batch of the current epoch into the caller's tensors and writes its size to
 * *out_batch_size: batch_size, fewer for a final partial batch (rows past it are zero images
 * with label 0), or 0 at the end of the epoch (the tensors are then untouched). Blocks until the
 * batch is ready; the time spent blocked is added to the stats.
 * images_out: contiguous f32 of the shape described at ctn_loader_batch_create. labels_out:
 * contiguous i32 or i64 [B]. Either may be NULL to skip it. Otherwise CTN_ERR_SHAPE /
 * CTN_ERR_DTYPE / CTN_ERR_STATE (non-contiguous).
 * Thread-safety: one consumer thread at a time per loader. since 1.1 */
CTN_API ctn_status ctn_loader_next(ctn_loader *loader, ctn_tensor *images_out,
                                   ctn_tensor *labels_out, int32_t *out_batch_size);

/* Starts epoch `epoch` (>= 0) from its first batch: discards batches prefetched for the previous
 * one, draws the permutation from (seed, epoch) when shuffling, and lets the workers begin.
 * Resetting to the same epoch repeats it exactly. since 1.1 */
CTN_API ctn_status ctn_loader_reset(ctn_loader *loader, int64_t epoch);

/* Number of batches per epoch (with the drop-last rule applied). since 1.1 */
CTN_API ctn_status ctn_loader_num_batches(const ctn_loader *loader, int64_t *out);

typedef struct ctn_loader_stats {
  uint32_t struct_size;   /* set by the caller to sizeof(ctn_loader_stats) */
  uint32_t num_workers;   /* worker threads (0 when synchronous) */
  uint64_t batches;       /* batches delivered by ctn_loader_next since creation */
  uint64_t samples;       /* samples delivered since creation */
  uint64_t waits;         /* ctn_loader_next calls that found their batch not ready */
  double wait_seconds;    /* total time ctn_loader_next blocked for a batch (synchronous mode:
                             the assembly time itself), excluding the final copy */
  double copy_seconds;    /* total time ctn_loader_next spent copying into the caller's tensors */
  double worker_seconds;  /* total time spent assembling batches (all workers) */
} ctn_loader_stats;

/* Cumulative statistics since creation (take differences for one epoch). Safe to call from the
 * consumer thread while workers run. since 1.1 */
CTN_API ctn_status ctn_loader_stats_get(ctn_loader *loader, ctn_loader_stats *out);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CHUTNEY_DATA_H */
