package chutney

/*
#include "shim.h"
*/
import "C"

import (
	"unsafe"
)

// FashionMNISTDir is where Debian's dataset-fashion-mnist package installs the files.
const FashionMNISTDir = C.CTN_FASHION_MNIST_DIR

// Dataset is an immutable set of u8 images and labels in memory (data.h). It may be used from
// several goroutines at once.
type Dataset struct {
	h   handle
	ptr *C.ctn_dataset
}

func (d *Dataset) hdl() *handle { return &d.h }

func (d *Dataset) use() error { return useOwner(d, "Dataset") }

func wrapDataset(p *C.ctn_dataset) *Dataset {
	d := &Dataset{ptr: p}
	d.h.init("Dataset", func() { C.ctn_dataset_release(p) })
	return track(d)
}

// OpenIDX reads an IDX image file (rank 3, u8) and label file (rank 1, u8), gzip'd or plain.
func OpenIDX(imagesPath, labelsPath string) (*Dataset, error) {
	var cs cstrings
	defer cs.free()
	s, err := cs.addAll(imagesPath, "images path", labelsPath, "labels path")
	if err != nil {
		return nil, err
	}
	var p *C.ctn_dataset
	if err := check(C.goctn_dataset_open_idx(s[0], s[1], &p)); err != nil {
		return nil, err
	}
	return wrapDataset(p), nil
}

// OpenFashionMNIST opens split "train" (60000 images) or "test" (10000) from dir ("" :
// FashionMNISTDir).
func OpenFashionMNIST(dir, split string) (*Dataset, error) {
	var cs cstrings
	defer cs.free()
	var d *C.char
	var err error
	if dir != "" {
		if d, err = cs.add(dir, "data dir"); err != nil {
			return nil, err
		}
	}
	s, err := cs.add(split, "split")
	if err != nil {
		return nil, err
	}
	var p *C.ctn_dataset
	if err := check(C.goctn_dataset_open_fashion_mnist(d, s, &p)); err != nil {
		return nil, err
	}
	return wrapDataset(p), nil
}

// Close drops the program's reference; loaders keep their own. Idempotent.
func (d *Dataset) Close() error { return closeOwner(d) }

// DatasetInfo describes a dataset.
type DatasetInfo struct {
	NumClasses int   // largest label + 1
	Count      int64 // samples
	Rows, Cols int   // image size
}

// Info describes the dataset.
func (d *Dataset) Info() (DatasetInfo, error) {
	i, err := getOwned(d, "Dataset", withSize(func(i *C.ctn_dataset_info) C.goctn_ret { return C.goctn_dataset_info_get(d.ptr, i) }))
	if err != nil {
		return DatasetInfo{}, err
	}
	return DatasetInfo{NumClasses: int(i.num_classes), Count: int64(i.count), Rows: int(i.rows), Cols: int(i.cols)}, nil
}

// Sample returns sample index's raw pixels (rows*cols, row-major) and label.
func (d *Dataset) Sample(index int64) ([]byte, int32, error) {
	info, err := d.Info()
	if err != nil {
		return nil, 0, err
	}
	if err := d.use(); err != nil {
		return nil, 0, err
	}
	defer d.h.release()
	pixels := make([]byte, info.Rows*info.Cols+1)
	var label C.int32_t
	if err := check(C.goctn_dataset_get(d.ptr, C.int64_t(index), (*C.uint8_t)(unsafe.Pointer(&pixels[0])), &label)); err != nil {
		return nil, 0, err
	}
	return pixels[:info.Rows*info.Cols], int32(label), nil
}

// Loader turns a dataset into batches of Float32 images and Int32 labels, assembled ahead on
// worker threads (data.h). One goroutine at a time may take batches from a loader.
type Loader struct {
	h   handle
	ptr *C.ctn_loader
}

func (l *Loader) hdl() *handle { return &l.h }

func (l *Loader) use() error { return useOwner(l, "Loader") }

// LoaderOptions configure NewLoader.
type LoaderOptions struct {
	BatchSize   int     // >= 1
	Shuffle     bool    // a new permutation each epoch, from (Seed, epoch)
	DropLast    bool    // skip a final partial batch
	Flat        bool    // images as [B, rows*cols] instead of [B, 1, rows, cols]
	HFlip       bool    // flip images left-right with probability 1/2
	Synchronous bool    // no threads: Next assembles the batch itself
	CropPadding int     // > 0: random crop after padding each side by this many pixels
	Seed        uint64  // shuffling and augmentation
	Mean, Std   float64 // pixel = (u8 / 255 - Mean) / Std; Std 0 means 1
	NumWorkers  int     // threads assembling batches; 0: 1
	Prefetch    int     // batches assembled ahead; 0: 2 * NumWorkers + 1
}

// NewLoader creates a loader over ds and starts epoch 0.
func NewLoader(ds *Dataset, o LoaderOptions) (*Loader, error) {
	if err := ds.use(); err != nil {
		return nil, err
	}
	defer ds.h.release()
	var c C.ctn_loader_options
	c.struct_size = C.uint32_t(unsafe.Sizeof(c))
	for _, f := range []struct {
		on   bool
		flag C.uint32_t
	}{{o.Shuffle, C.CTN_LOADER_SHUFFLE}, {o.DropLast, C.CTN_LOADER_DROP_LAST}, {o.Flat, C.CTN_LOADER_FLAT},
		{o.HFlip, C.CTN_LOADER_HFLIP}, {o.Synchronous, C.CTN_LOADER_SYNCHRONOUS}} {
		if f.on {
			c.flags |= f.flag
		}
	}
	c.batch_size = i32(o.BatchSize)
	c.crop_padding = i32(o.CropPadding)
	c.seed = C.uint64_t(o.Seed)
	c.mean, c.std = C.double(o.Mean), C.double(o.Std)
	c.num_workers, c.prefetch = i32(o.NumWorkers), i32(o.Prefetch)
	var p *C.ctn_loader
	if err := check(C.goctn_loader_create(ds.ptr, &c, &p)); err != nil {
		return nil, err
	}
	l := &Loader{ptr: p}
	l.h.init("Loader", func() { C.ctn_loader_release(p) })
	return track(l), nil
}

// Close stops the workers and frees the buffers. Idempotent.
func (l *Loader) Close() error { return closeOwner(l) }

// NewBatch creates a pair of tensors of the shapes Next fills: images Float32 [B, 1, rows,
// cols] (or [B, rows*cols] when Flat) and labels Int32 [B].
func (l *Loader) NewBatch() (images, labels *Tensor, err error) {
	if err := l.use(); err != nil {
		return nil, nil, err
	}
	defer l.h.release()
	var x, y *C.ctn_tensor
	if err := check(C.goctn_loader_batch_create(l.ptr, &x, &y)); err != nil {
		return nil, nil, err
	}
	if images, err = adoptTensor(x); err != nil {
		C.ctn_tensor_release(y)
		return nil, nil, err
	}
	if labels, err = adoptTensor(y); err != nil {
		images.Close()
		return nil, nil, err
	}
	return images, labels, nil
}

// Next copies the next batch of the epoch into images and labels (either may be nil to skip
// it) and returns its size: BatchSize, fewer for a final partial batch, 0 at the end of the
// epoch.
func (l *Loader) Next(images, labels *Tensor) (int, error) {
	if err := l.use(); err != nil {
		return 0, err
	}
	defer l.h.release()
	var xp, yp *C.ctn_tensor
	if images != nil {
		if err := images.use(); err != nil {
			return 0, err
		}
		defer images.h.release()
		xp = images.ptr
	}
	if labels != nil {
		if err := labels.use(); err != nil {
			return 0, err
		}
		defer labels.h.release()
		yp = labels.ptr
	}
	var n C.int32_t
	if err := check(C.goctn_loader_next(l.ptr, xp, yp, &n)); err != nil {
		return 0, err
	}
	return int(n), nil
}

// Reset starts epoch (>= 0) from its first batch; the same epoch repeats exactly.
func (l *Loader) Reset(epoch int64) error {
	if err := l.use(); err != nil {
		return err
	}
	defer l.h.release()
	return check(C.goctn_loader_reset(l.ptr, C.int64_t(epoch)))
}

// NumBatches is the number of batches per epoch.
func (l *Loader) NumBatches() (int64, error) {
	n, err := getOwned(l, "Loader", func(n *C.int64_t) C.goctn_ret { return C.goctn_loader_num_batches(l.ptr, n) })
	return int64(n), err
}

// LoaderStats are cumulative loader statistics since creation.
type LoaderStats struct {
	NumWorkers    int
	Batches       uint64
	Samples       uint64
	Waits         uint64  // Next calls that found their batch not ready
	WaitSeconds   float64 // time Next blocked for a batch
	CopySeconds   float64 // time Next spent copying into the caller's tensors
	WorkerSeconds float64 // time spent assembling batches, all workers
}

// Stats returns the loader's statistics.
func (l *Loader) Stats() (LoaderStats, error) {
	s, err := getOwned(l, "Loader", withSize(func(s *C.ctn_loader_stats) C.goctn_ret { return C.goctn_loader_stats_get(l.ptr, s) }))
	if err != nil {
		return LoaderStats{}, err
	}
	return LoaderStats{
		NumWorkers: int(s.num_workers), Batches: uint64(s.batches), Samples: uint64(s.samples),
		Waits: uint64(s.waits), WaitSeconds: float64(s.wait_seconds), CopySeconds: float64(s.copy_seconds),
		WorkerSeconds: float64(s.worker_seconds),
	}, nil
}
